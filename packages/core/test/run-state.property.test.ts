import { applyStateChanges, applyStateChangesSized, stateSize } from '@arcflow/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

const key = fc.constantFrom('a', 'b', 'ç', 'list');
const change = fc.oneof(
  fc.tuple(fc.constant('set' as const), key, fc.jsonValue({ maxDepth: 2 })),
  fc.tuple(fc.constant('append' as const), key, fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 })),
  fc.tuple(fc.constant('delete' as const), key),
);

describe('run state changes (SPEC §17)', () => {
  it("works out the state's JSON size from the changes alone, as writing the state out would count it, and applies them alike", () => {
    fc.assert(
      fc.property(fc.dictionary(key, fc.jsonValue({ maxDepth: 2 })), fc.array(change, { maxLength: 8 }), (drawn, changes) => {
        // As JSON carries it (no -0, no undefined).
        const state = JSON.parse(JSON.stringify(drawn)) as Record<string, unknown>;
        const sized = applyStateChangesSized(state, stateSize(state), changes);
        const plain = applyStateChanges(state, changes);
        expect(JSON.stringify(sized.state)).toBe(JSON.stringify(plain.state));
        expect(sized.keys).toEqual(plain.keys);
        expect(sized.size).toBe(stateSize(sized.state));
      }),
      { numRuns: 2000 },
    );
  });
});
