import { ReactWidget } from '@jupyterlab/apputils';
import { nullTranslator } from '@jupyterlab/translation';
import { MessageLoop } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';
import * as React from 'react';

import { describe as describeStatus, upperBoundText } from '../display';
import { machineLine } from '../machine/format';
import { Prices } from '../panel/prices';
import { IPanelStatus } from '../panel/types';
import { IGpuCostStatus } from '../tokens';
import { makeGpu, makeStatus } from './fixtures';

const trans = nullTranslator.load('jupyter_gpucost');
const SPOT = 'spot: priced at on-demand, the most it can cost';

/** A g5.xlarge spot instance, priced at its on-demand price (no spot row). */
function spotStatus(): IGpuCostStatus {
  return makeStatus({
    cost: 0.02,
    rate_per_hour: 1.006,
    price_basis: 'upper-bound',
    price_basis_reasons: [SPOT],
    gpus: [
      makeGpu({
        name: 'NVIDIA A10G',
        model: 'A10G',
        price_per_hour: 1.006,
        price_source: 'upper bound: aws g5.xlarge on-demand us-east-1',
        price_basis: 'upper-bound',
        price_basis_reason: SPOT
      })
    ],
    machine: {
      provider: 'aws',
      instance_type: 'g5.xlarge',
      region: 'us-east-1',
      market: 'spot',
      instance_id: 'i-0123456789abcdef0',
      source: 'dmi+metadata',
      shared: false,
      stoppable: true,
      priced: 'instance',
      instance_price_per_hour: 1.006,
      instance_price_confidence: 'listed',
      instance_price_basis: 'upper-bound',
      price_note:
        'no whole-instance price for g5.xlarge spot: priced at on-demand, the most it can cost'
    }
  });
}

/** The text an element shows once rendered. */
async function shown(element: React.ReactElement): Promise<string> {
  const widget = ReactWidget.create(element);
  Widget.attach(widget, document.body);
  MessageLoop.sendMessage(widget, Widget.Msg.UpdateRequest);
  await widget.renderPromise;
  await new Promise(resolve => setTimeout(resolve, 0));
  const text = widget.node.textContent ?? '';
  widget.dispose();
  return text;
}

describe('an upper-bound price', () => {
  const snapshot = {
    status: spotStatus(),
    receivedAt: Date.UTC(2026, 10, 27, 8, 0, 0),
    missing: false,
    error: null
  };

  it('reads as at most the rate in the status bar, and says why in its tooltip', () => {
    const display = describeStatus(snapshot, trans);
    expect(display.rate).toBe('≤ $1.01/h');
    expect(display.title).toContain(`Upper bound: ${SPOT}.`);
    expect(display.title).toContain(
      'priced as a whole instance at an upper bound: $1.01/h (no whole-instance price for g5.xlarge spot'
    );
  });

  it('is labelled in the panel prices', async () => {
    const text = await shown(
      <Prices status={spotStatus() as IPanelStatus} symbol="$" trans={trans} />
    );
    expect(text).toContain(
      `A10G: upper bound: aws g5.xlarge on-demand us-east-1 (upper bound: ${SPOT})`
    );
  });

  it('is not said of a listed price', () => {
    const listed = makeStatus();
    expect(upperBoundText(listed, trans)).toBeNull();
    expect(describeStatus({ ...snapshot, status: listed }, trans).rate).toBe(
      '$6.86/h'
    );
    expect(machineLine(listed, '$', trans)).toBeNull();
  });
});
