import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, silentLogger } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { freePort, scriptedProvider } from '@arcflow/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// A redis-server speaking TLS only, with a self-signed certificate that no CA of this process signed.
let server: ChildProcess | undefined;
let dir = '';
let url = '';

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'arcflow-redis-tls-'));
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '1', '-subj', '/CN=127.0.0.1'],
    {
      stdio: 'ignore',
    },
  );
  const port = await freePort();
  server = spawn(
    'redis-server',
    [
      '--port',
      '0',
      '--tls-port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--tls-cert-file',
      join(dir, 'cert.pem'),
      '--tls-key-file',
      join(dir, 'key.pem'),
      '--tls-auth-clients',
      'no',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
    ],
    { stdio: 'ignore' },
  );
  await listening(port);
  url = `rediss://:s3cret@127.0.0.1:${port}`;
});

afterAll(() => {
  server?.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

async function listening(port: number): Promise<void> {
  for (let tries = 0; tries < 100; tries += 1) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`redis-server did not listen on ${port}`);
}

describe('a Redis whose TLS certificate this process does not trust', () => {
  const trust = 'to trust it, start the process with NODE_EXTRA_CA_CERTS=/path/to/ca.pem';

  it('fails a client call at once, naming the certificate problem and how to trust it, the password hidden', async () => {
    const client = createClient({ redis: url, prefix: 'tls-trust', redis_timeout_ms: 30_000 });
    const failure = (await client.list().catch((error: unknown) => error)) as Error;
    await client.close();
    expect(failure).toMatchObject({ name: 'ConfigError' });
    expect(failure.message).toContain(
      `the Redis at ${url.replace(':s3cret@', ':***@')} presents a TLS certificate this process does not trust (DEPTH_ZERO_SELF_SIGNED_CERT: a self-signed certificate)`,
    );
    expect(failure.message).toContain(trust);
    expect(failure.message).not.toContain('s3cret');
  });

  it('fails a worker start instead of waiting for a connection that cannot succeed', async () => {
    const failure = (await startWorker({ agents: [new Agent({ name: 'idle' })], provider: scriptedProvider([]), redis: url, prefix: 'tls-trust', logger: silentLogger }).catch(
      (error: unknown) => error,
    )) as Error;
    expect(failure).toMatchObject({ name: 'ConfigError' });
    expect(failure.message).toContain('(DEPTH_ZERO_SELF_SIGNED_CERT: a self-signed certificate)');
    expect(failure.message).toContain(trust);
  });
});
