import { nullTranslator } from '@jupyterlab/translation';

import { kernelCostDigits, kernelRows } from '../panel/format';
import { IKernelsAnswer } from '../panel/types';

const trans = nullTranslator.load('jupyter_gpucost');

/** A kernel table with dimes and fractions of a cent in one Cost column. */
function answer(): IKernelsAnswer {
  return {
    as_of: '2026-11-25T10:00:00Z',
    pids_visible: true,
    note: null,
    total: 0.1712,
    idle: 0.0608,
    unattributed: 0.0004,
    minimum_charge: 0,
    micro: { total: 171_200, idle: 60_800, unattributed: 400 },
    kernels: [
      {
        id: 'k1',
        name: 'python3',
        notebook_path: 'train.ipynb',
        execution_state: 'idle',
        started: null,
        uptime_s: 10,
        pids: [101],
        remote: false,
        gpu_share: { '0': 1 },
        gpu_share_by: { '0': 'sm_samples' },
        cost: 0.11
      }
    ]
  } as unknown as IKernelsAnswer;
}

describe("the kernel table's Cost column", () => {
  it('writes every amount, its total included, with one number of decimals', () => {
    const rows = kernelRows(answer(), '$', trans);
    expect(rows.map(row => row.cost)).toEqual([
      '$0.1100',
      '$0.0004',
      '$0.0608'
    ]);
    expect(kernelCostDigits(answer())).toBe(4);
    const dollars = { ...answer(), idle: 1.5, unattributed: 0.2 };
    expect(kernelRows(dollars, '$', trans).map(row => row.cost)).toEqual([
      '$0.11',
      '$0.20',
      '$1.50'
    ]);
  });
});
