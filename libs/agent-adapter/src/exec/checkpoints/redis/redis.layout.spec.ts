import calculateSlot from 'cluster-key-slot';
import {
  CALL_FIELD,
  CHECKPOINT_FIELD,
  COLUMNS_FIELD,
  HEAD_FIELDS,
  QUEUE_PARTS,
  RedisKeys,
} from './redis.layout';
import { CALLS_LUA, LATEST_LUA, SAVE_LUA } from './redis.scripts';
import { ADMIT_LUA, LEAVE_QUEUE_LUA } from './redis.queue-scripts';

describe('Redis key layout', () => {
  it('keeps each script on one slot: a run’s keys share its tag, the index keys the tenant’s', () => {
    const keys = new RedisKeys('tenant');
    const slots = (list: readonly string[]) =>
      new Set(list.map((k) => calculateSlot(k)));
    expect(slots(keys.run('run-1')).size).toBe(1);
    expect(keys.runHash('run-1')).toBe(keys.run('run-1')[0]);
    expect(slots(keys.announce('flow-a')).size).toBe(1);
    expect(slots([keys.unfinished('flow-b'), keys.born, keys.runs])).toEqual(
      slots(keys.announce('flow-a')),
    );
    // Another tenant's keys are other keys.
    expect(new RedisKeys('other').run('run-1')).not.toEqual(keys.run('run-1'));
  });

  it('the save script writes every head field the store reads, and the field prefixes it reads back', () => {
    for (const field of HEAD_FIELDS) expect(SAVE_LUA).toContain(`'${field}'`);
    expect(SAVE_LUA).toContain(`'${CHECKPOINT_FIELD}' .. ARGV[3]`);
    expect(SAVE_LUA).toContain(`'${COLUMNS_FIELD}' .. ARGV[3]`);
    expect(SAVE_LUA).toContain(`'${CALL_FIELD}' .. m`);
    expect(LATEST_LUA).toContain(`'${CHECKPOINT_FIELD}' .. h[1]`);
    expect(CALLS_LUA).toContain(`'${CALL_FIELD}' .. members[i]`);
  });

  it('a queue’s keys share the index keys’ slot, and are named as its scripts name them', () => {
    const keys = new RedisKeys('tenant');
    const slot = calculateSlot(keys.runs);
    for (const name of ['q', 'a:b', '{x}', '']) {
      const q = keys.queue(name);
      for (const part of QUEUE_PARTS) {
        expect(calculateSlot(q[part])).toBe(slot);
        expect(q[part]).toBe(`${keys.queuePrefix}${name}:${part}`);
        expect(LEAVE_QUEUE_LUA).toContain(`q .. '${part}'`);
      }
    }
    expect(calculateSlot(keys.queued)).toBe(slot);
    expect(keys.unfinished('f')).toBe(`${keys.unfinished('')}f`);
    expect(ADMIT_LUA).toContain(`ARGV[3] .. p.f`);
  });
});
