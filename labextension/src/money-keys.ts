/**
 * The server names each amount for what it is (`cost`, `rate_per_hour`,
 * `amount`, `micro`): a sum in the session's currency, whichever that is
 * (docs/api.md, "Money keys"). It still sends the old `_usd` name beside
 * each one, deprecated.
 *
 * An older server (one from before the new names) answers with the `_usd`
 * names only: `withMoneyKeys` gives every such amount its new name as well,
 * so that the readers read the new names alone. It is applied where such an
 * answer comes in: the status (with the budget and the machine it embeds),
 * the budget's events, the kernels, the history and the panel's event. Once
 * the old names are removed from the server, this goes too.
 */
export function withMoneyKeys<T>(document: T): T {
  return Private.fill(document) as T;
}

namespace Private {
  export function fill(value: unknown): unknown {
    if (Array.isArray(value)) {
      return value.map(fill);
    }
    if (typeof value !== 'object' || value === null) {
      return value;
    }
    const source = value as { [key: string]: unknown };
    const out: { [key: string]: unknown } = {};
    for (const [key, item] of Object.entries(source)) {
      out[key] = fill(item);
    }
    for (const [key, item] of Object.entries(source)) {
      const name = key.replace('_usd', '');
      if (name !== key && !(name in source)) {
        out[name] = fill(item);
      }
    }
    return out;
  }
}
