import { createHash, timingSafeEqual } from 'node:crypto';
import type { ApiKey, Scope } from './options.ts';

/** Who a request is: the key's name and scope (`local` with `admin` when no keys are set). */
export interface Caller {
  readonly name: string;
  readonly scope: Scope;
}

const RANK: Readonly<Record<Scope, number>> = { read: 0, write: 1, admin: 2 };

/** Whether `caller`'s scope covers `needed` (write includes read; admin includes write). */
export function allows(caller: Caller, needed: Scope): boolean {
  return RANK[caller.scope] >= RANK[needed];
}

export const SESSION_COOKIE = 'arcflow_session';

/**
 * Finds the key a secret belongs to. Every key is compared, each in constant time over SHA-256
 * digests (equal lengths whatever was sent), so the time taken says nothing about which key or
 * how much of one matched.
 */
export class KeyRing {
  private readonly digests: readonly { key: ApiKey; digest: Buffer }[];

  constructor(readonly keys: readonly ApiKey[]) {
    this.digests = keys.map((key) => ({ key, digest: sha256(key.secret) }));
  }

  get open(): boolean {
    return this.keys.length === 0;
  }

  find(secret: string | undefined): Caller | undefined {
    if (this.open) return { name: 'local', scope: 'admin' };
    if (!secret) return undefined;
    const presented = sha256(secret);
    let found: ApiKey | undefined;
    for (const { key, digest } of this.digests) if (timingSafeEqual(presented, digest) && !found) found = key;
    return found ? { name: found.name, scope: found.scope } : undefined;
  }
}

/** The secret a request presents: `Authorization: Bearer <secret>`, else the console's session cookie. */
export function presentedSecret(authorization: string | undefined, cookie: string | undefined): string | undefined {
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
  return bearer?.[1] ?? cookie;
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
