// No import cycles in the front end: every module of labextension/src and what it imports
// (`import`, `import type`, `export ... from`, `import('...')`: a type is a dependency too),
// resolved to files, and every cycle found printed; exits 1 if there is one.
//
//     node scripts/ts_import_cycles.mjs [labextension/src]
//
// Run by `jlpm lint:check` (and so by `make lint` and `make test`). Before it reads the
// sources it checks itself on a graph with a known cycle, so it cannot pass vacuously.

import { readFileSync, readdirSync, statSync, existsSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const SPECIFIER =
  /(?:^|[\s;}])(?:import|export)\s+(?:type\s+)?(?:[\w*{}\s,$]+?\s+from\s+)?['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;
const EXTENSIONS = ['.ts', '.tsx', '/index.ts', '/index.tsx'];

function sources(dir) {
  const found = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      if (name !== '__tests__') {
        found.push(...sources(path));
      }
    } else if (/\.tsx?$/.test(name) && !name.endsWith('.d.ts')) {
      found.push(path);
    }
  }
  return found;
}

function withoutComments(text) {
  return text
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/(^|[^:])\/\/.*$/gm, '$1');
}

function resolveLocal(from, specifier) {
  if (!specifier.startsWith('.')) {
    return null;
  }
  const base = resolve(dirname(from), specifier);
  for (const ext of ['', ...EXTENSIONS]) {
    const path = base + ext;
    if (existsSync(path) && statSync(path).isFile()) {
      return path;
    }
  }
  throw new Error(`${from}: cannot resolve ${specifier}`);
}

export function graphOf(root) {
  const graph = new Map();
  for (const file of sources(root)) {
    const targets = new Set();
    const text = withoutComments(readFileSync(file, 'utf8'));
    for (const match of text.matchAll(SPECIFIER)) {
      const target = resolveLocal(file, match[1] ?? match[2]);
      if (target !== null && target !== file) {
        targets.add(relative(root, target));
      }
    }
    graph.set(relative(root, file), targets);
  }
  return graph;
}

// Strongly connected components of more than one module (Tarjan).
export function cycles(graph) {
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const found = [];
  const visit = v => {
    index.set(v, index.size);
    low.set(v, index.get(v));
    stack.push(v);
    onStack.add(v);
    for (const w of [...(graph.get(v) ?? [])].sort()) {
      if (!graph.has(w)) {
        continue;
      }
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v), index.get(w)));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component = [];
      let w;
      do {
        w = stack.pop();
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) {
        found.push(component.sort());
      }
    }
  };
  for (const v of [...graph.keys()].sort()) {
    if (!index.has(v)) {
      visit(v);
    }
  }
  return found;
}

function selfCheck() {
  // the front end's old circle: format -> tokens -> machine/format -> format
  const graph = new Map([
    ['format.ts', new Set(['tokens.ts'])],
    ['tokens.ts', new Set(['machine/format.ts'])],
    ['machine/format.ts', new Set(['format.ts'])],
    ['i18n.ts', new Set()]
  ]);
  const found = cycles(graph);
  if (found.length !== 1 || found[0].length !== 3) {
    throw new Error(
      `the cycle finder misses a known cycle: ${JSON.stringify(found)}`
    );
  }
  const lines = [
    "import type { IMachine } from './machine/format';",
    "export { trans } from './i18n';",
    "import {\n  a,\n  b\n} from '../budget/tokens';",
    "const m = await import('./panel');"
  ].join('\n');
  const specifiers = [...lines.matchAll(SPECIFIER)].map(m => m[1] ?? m[2]);
  const expected = [
    './machine/format',
    './i18n',
    '../budget/tokens',
    './panel'
  ];
  if (JSON.stringify(specifiers) !== JSON.stringify(expected)) {
    throw new Error(
      `the import reader misreads imports: ${JSON.stringify(specifiers)}`
    );
  }
}

const root = resolve(process.argv[2] ?? 'labextension/src');
selfCheck();
const graph = graphOf(root);
const found = cycles(graph);
if (found.length > 0) {
  for (const cycle of found) {
    console.error(
      `import cycle in ${relative(process.cwd(), root)}: ${cycle.join(' <-> ')}`
    );
  }
  process.exit(1);
}
console.log(
  `no import cycles in ${graph.size} modules of ${relative(process.cwd(), root)}`
);
