import { applyStateChanges, applyStateChangesSized, stateSize } from '@arcflow/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

// `__proto__` and `constructor` are keys like any other: kept as the state's own.
const key = fc.constantFrom('a', 'b', 'ç', 'list', '__proto__', 'constructor');
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
        // Every key whose value the changes left different is named, and only keys they touched.
        const own = (object: Record<string, unknown>, name: string) => (Object.hasOwn(object, name) ? JSON.stringify(object[name]) : undefined);
        const differing = [...new Set([...Object.keys(state), ...Object.keys(plain.state)])].filter(
          (name) => own(state, name) !== own(plain.state as Record<string, unknown>, name),
        );
        for (const name of differing) expect(plain.keys).toContain(name);
        for (const name of plain.keys) expect(changes.map((each) => each[1])).toContain(name);
      }),
      { numRuns: 2000 },
    );
  });

  it('names no key for changes that leave the state as it was: a delete of a key not held, a set to the value held, an append of nothing', () => {
    const state = { a: 1, list: [1], nested: { x: [1, 2] } };
    const applied = applyStateChangesSized(state, stateSize(state), [
      ['delete', 'missing'],
      ['set', 'a', 1],
      ['set', 'nested', { x: [1, 2] }],
      ['append', 'list', []],
    ]);
    expect(applied).toEqual({ state, keys: [], size: stateSize(state) });
    expect(applyStateChanges(state, [['set', 'a', 2]]).keys).toEqual(['a']);
  });

  it("keeps a key named __proto__ as the state's own, in its JSON and its size", () => {
    const applied = applyStateChangesSized({}, 2, [
      ['set', '__proto__', { a: 1 }],
      ['set', 'b', 2],
    ]);
    expect(JSON.stringify(applied.state)).toBe('{"__proto__":{"a":1},"b":2}');
    expect(applied.size).toBe(stateSize(applied.state));
    expect(Object.getPrototypeOf(applied.state)).toBe(Object.prototype);
    expect(applied.keys).toEqual(['__proto__', 'b']);
  });
});
