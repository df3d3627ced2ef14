import {
  InterruptionCountdown,
  interruptionItemText,
  interruptionMessage,
  providerName
} from '../budget/interruption';

describe('spot interruption countdown', () => {
  afterEach(() => {
    jest.useRealTimers();
  });

  it('names the cloud and the time left', () => {
    expect(providerName('gcp')).toBe('Google Cloud');
    expect(providerName('azure')).toBe('Azure');
    expect(interruptionMessage('aws', 112)).toBe(
      'AWS takes this spot machine back in 1:52: saving notebooks and checkpoints.'
    );
    expect(interruptionItemText(29.2)).toBe('spot: taken back in 0:30');
    expect(interruptionItemText(-3)).toBe('spot: taken back in 0:00');
  });

  it('counts down every second, then says the machine is gone', () => {
    jest.useFakeTimers();
    jest.setSystemTime(new Date('2026-11-27T14:00:00Z'));
    const countdown = new InterruptionCountdown();
    expect(countdown.visible).toBe(false);
    countdown.show('aws', '2026-11-27T14:00:03Z');
    expect(countdown.visible).toBe(true);
    expect(countdown.item.node.textContent).toBe('spot: taken back in 0:03');
    jest.advanceTimersByTime(1000);
    expect(countdown.item.node.textContent).toBe('spot: taken back in 0:02');
    countdown.done('Spot interruption: told: done');
    // the machine still goes at the deadline: the countdown goes on
    expect(countdown.item.node.textContent).toBe('spot: taken back in 0:02');
    expect(countdown.item.node.title).toBe('Spot interruption: told: done');
    jest.advanceTimersByTime(3000);
    expect(countdown.item.node.textContent).toBe('spot: interrupted');
    expect(countdown.active).toBe(false);
    countdown.close();
    expect(countdown.visible).toBe(false);
  });
});
