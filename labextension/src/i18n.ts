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
 * Use `translator` for the extension's messages. The model's plugin calls this
 * once, from JupyterLab's `ITranslator`; every other plugin activates after it
 * (it requires or optionally takes the model) and reads `trans()`. This is the
 * one place the domain is loaded: views and controllers call `trans()`, and
 * pure formatting functions take the bundle from their caller.
 */
export function setTranslator(translator: ITranslator): void {
  Private.bundle.current = translator.load(TRANSLATION_DOMAIN);
}

/**
 * The extension's messages in the UI's language:
 * `trans().__('Raise budget')`.
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
