import {
  ITranslator,
  nullTranslator,
  TranslationBundle
} from '@jupyterlab/translation';

/**
 * The extension's translation domain: its messages, shipped as
 * `jupyter_gpucost/locale/<language>/LC_MESSAGES/jupyter_gpucost.json`.
 */
export const TRANSLATION_DOMAIN = 'jupyter_gpucost';

/**
 * Use `translator` for the extension's messages (the model plugin, which every
 * other plugin requires, calls this once at start).
 */
export function setTranslator(translator: ITranslator): void {
  Private.bundle.current = translator.load(TRANSLATION_DOMAIN);
}

/**
 * The extension's messages in the UI's language, for code that has no
 * translator of its own (budget, cells, export): `trans().__('Raise budget')`.
 */
export function trans(): TranslationBundle {
  return Private.bundle.current;
}

/**
 * Module-private state.
 */
namespace Private {
  export const bundle = { current: nullTranslator.load(TRANSLATION_DOMAIN) };
}
