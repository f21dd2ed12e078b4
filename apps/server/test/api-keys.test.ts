import { ConfigError } from '@arcflow/core';
import { describe, expect, it } from 'vitest';
import { parseApiKeys } from '../src/options.ts';

// SPEC §8: API keys are never logged — a malformed ARCFLOW_API_KEYS entry is named by its place,
// and by its name only when it has the three fields a name comes first in.

const refusal = (value: string) => {
  try {
    parseApiKeys(value);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error('expected a ConfigError');
};

describe('ARCFLOW_API_KEYS', () => {
  it('reads name:secret:scope entries', () => {
    expect(parseApiKeys('viewer:0123456789abcdef:read, ops:fedcba9876543210:admin')).toEqual([
      { name: 'viewer', secret: '0123456789abcdef', scope: 'read' },
      { name: 'ops', secret: 'fedcba9876543210', scope: 'admin' },
    ]);
  });

  it('never repeats a secret in its refusals, whatever the entry is missing', () => {
    for (const [value, message] of [
      ['s3cr3tTOKENvalue9999', 'ARCFLOW_API_KEYS entry 1 (1 field) must be name:secret:scope, scope one of read, write, admin'],
      ['ok:0123456789abcdef:read,s3cr3tTOKENvalue9999:admin', 'ARCFLOW_API_KEYS entry 2 (2 fields) must be name:secret:scope, scope one of read, write, admin'],
      ['ci:s3cr3tTOKENvalue9999:root', "ARCFLOW_API_KEYS entry 1 ('ci') must be name:secret:scope, scope one of read, write, admin"],
      ['ci:short:read', "ARCFLOW_API_KEYS entry 1 ('ci'): the secret must be at least 16 characters"],
    ] as const) {
      const said = refusal(value);
      expect(said).toBe(message);
      expect(said).not.toContain('s3cr3t');
    }
  });
});
