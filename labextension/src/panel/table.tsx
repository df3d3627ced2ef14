import * as React from 'react';

/**
 * One column of a panel table.
 */
export interface IColumn<T> {
  /** The header, already translated. */
  header: string;
  /** What the cell shows. */
  cell: (row: T) => React.ReactNode;
  /** Right-aligned figures (amounts). */
  numeric?: boolean;
  /** A class on the cells of this column. */
  className?: string;
  /** A tooltip on a cell. */
  title?: (row: T) => string | undefined;
  /** A tooltip on the header: what the column measures. */
  headerTitle?: string;
}

/**
 * The panel's one table: a header, a row per item (with `data-*` attributes
 * the tests and styles read), an optional footer, in a scrolling box so that
 * a narrow sidebar (Notebook 7) does not clip it.
 */
export function PanelTable<T>(props: {
  className: string;
  columns: IColumn<T>[];
  rows: readonly T[];
  rowKey: (row: T) => string;
  rowAttributes?: (row: T) => { [attribute: string]: string | undefined };
  footer?: React.ReactNode;
}): React.ReactElement {
  const { className, columns, rows, rowKey, rowAttributes, footer } = props;
  const cellClass = (column: IColumn<T>): string | undefined =>
    [column.numeric ? 'jp-gpucost-num' : '', column.className ?? '']
      .filter(name => name !== '')
      .join(' ') || undefined;
  return (
    <div className="jp-gpucost-table-scroll">
      <table className={className}>
        <thead>
          <tr>
            {columns.map(column => (
              <th
                key={column.header}
                className={column.numeric ? 'jp-gpucost-num' : undefined}
                title={column.headerTitle}
              >
                {column.header}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map(row => (
            <tr key={rowKey(row)} {...(rowAttributes?.(row) ?? {})}>
              {columns.map(column => (
                <td
                  key={column.header}
                  className={cellClass(column)}
                  title={column.title?.(row)}
                >
                  {column.cell(row)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
        {footer && <tfoot>{footer}</tfoot>}
      </table>
    </div>
  );
}
