const jestJupyterLab = require('@jupyterlab/testing/lib/jest-config');

// ES modules that must be compiled for jest.
const esModules = [
  '@codemirror',
  '@jupyter/ydoc',
  '@jupyter/react-components',
  '@jupyter/web-components',
  '@jupyterlab/',
  '@microsoft',
  'exenv-es6',
  'lib0',
  'nanoid',
  'vscode-ws-jsonrpc',
  'y-protocols',
  'y-websocket',
  'yjs'
].join('|');

const baseConfig = jestJupyterLab(__dirname);

// The tests run in a time zone that is not UTC, so that a time shown in UTC
// where the browser's local time is meant does not pass unnoticed.
process.env.TZ = 'America/New_York';

module.exports = {
  ...baseConfig,
  automock: false,
  roots: ['<rootDir>/labextension/src'],
  collectCoverageFrom: [
    'labextension/src/**/*.{ts,tsx}',
    '!labextension/src/**/*.d.ts',
    '!labextension/src/__tests__/**'
  ],
  // Coverage is printed, not written: nothing lands in the working tree.
  coverageReporters: ['text-summary'],
  reporters: ['default'],
  testRegex: 'labextension/src/__tests__/.*\\.spec\\.tsx?$',
  transformIgnorePatterns: [`/node_modules/(?!${esModules}).+`]
};
