import { ConfigError } from '@arcflow/core';
import { expect } from 'vitest';

/** What JavaScript callers and JSON configs may pass: no compiler stands between them and the constructor. */
export const untyped = (value: Record<string, unknown>) => value as never;

/** The message of the ConfigError `build` throws; fails the test when it throws none or another kind. */
export function refusal(build: () => unknown): string {
  try {
    build();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error('expected a ConfigError, got none');
}
