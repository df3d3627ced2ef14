import { ReactWidget } from '@jupyterlab/ui-components';
import * as React from 'react';

/**
 * The notebook toolbar's per-cell switch (`$/cell`, `¥/cell`): a toolbar
 * button whose label follows the session's currency, which the server may
 * name after the notebook opened.
 */
export class CellCostToggle extends ReactWidget {
  constructor(options: CellCostToggle.IOptions) {
    super();
    this.addClass('jp-ToolbarButton');
    this._label = options.label;
    this._tooltip = options.tooltip;
    this._pressed = options.pressed;
    this._onClick = options.onClick;
  }

  /** Whether per-cell pricing is on in this notebook. */
  get pressed(): boolean {
    return this._pressed;
  }
  set pressed(value: boolean) {
    if (value !== this._pressed) {
      this._pressed = value;
      this.update();
    }
  }

  /** The button's text, e.g. `¥/cell`. */
  get label(): string {
    return this._label;
  }
  set label(value: string) {
    if (value !== this._label) {
      this._label = value;
      this.update();
    }
  }

  protected render(): React.ReactElement {
    // a native toggle button: JupyterLab's toolbar button puts aria-pressed on
    // its custom element, which has no role that allows it (axe-core flags it)
    return (
      <button
        type="button"
        className="jp-ToolbarButtonComponent jp-gpucost-cell-toggle"
        aria-pressed={this._pressed}
        title={this._tooltip}
        onClick={this._onClick}
        onMouseDown={event => event.preventDefault()}
      >
        <span className="jp-ToolbarButtonComponent-label">{this._label}</span>
      </button>
    );
  }

  private _label: string;
  private _pressed: boolean;
  private readonly _tooltip: string;
  private readonly _onClick: () => void;
}

export namespace CellCostToggle {
  export interface IOptions {
    label: string;
    tooltip: string;
    pressed: boolean;
    onClick: () => void;
  }
}
