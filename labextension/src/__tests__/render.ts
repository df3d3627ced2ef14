import { ReactWidget } from '@jupyterlab/apputils';
import { MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';
import * as React from 'react';

/**
 * Render a React element in a widget attached to the page, wait for React to
 * commit, and return a copy of what it drew (the widget is disposed).
 */
export async function renderNode(
  element: React.ReactElement
): Promise<HTMLElement> {
  const widget = ReactWidget.create(element);
  Widget.attach(widget, document.body);
  MessageLoop.sendMessage(widget, Widget.Msg.UpdateRequest);
  await widget.renderPromise;
  await new Promise(resolve => setTimeout(resolve, 0));
  const node = widget.node.cloneNode(true) as HTMLElement;
  widget.dispose();
  return node;
}
