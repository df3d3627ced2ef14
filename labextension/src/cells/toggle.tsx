import { ReactWidget, ToolbarButtonComponent } from '@jupyterlab/ui-components';
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
    return (
      <ToolbarButtonComponent
        className="jp-gpucost-cell-toggle"
        label={this._label}
        tooltip={this._tooltip}
        pressed={this._pressed}
        onClick={this._onClick}
      />
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
