import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, silentLogger } from '@arcflow/core';
import { createClient, startWorker } from '@arcflow/queue';
import { freePort, scriptedProvider } from '@arcflow/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runFixture } from './harness.ts';

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

  it('says so at once for a cluster listed with rediss: nodes too, to a client and to a worker', async () => {
    const nodes = `${url},${url.replace(':s3cret@', '@')}`;
    const client = createClient({ redis: nodes, prefix: 'tls-trust', redis_timeout_ms: 30_000 });
    const started = Date.now();
    const failure = (await client.list().catch((error: unknown) => error)) as Error;
    await client.close();
    expect(failure).toMatchObject({ name: 'ConfigError' });
    expect(failure.message).toContain('presents a TLS certificate this process does not trust (DEPTH_ZERO_SELF_SIGNED_CERT: a self-signed certificate)');
    expect(failure.message).toContain(trust);
    expect(failure.message).not.toContain('s3cret');
    expect(Date.now() - started).toBeLessThan(10_000);
    const refused = (await startWorker({ agents: [new Agent({ name: 'idle' })], provider: scriptedProvider([]), redis: nodes, prefix: 'tls-trust', logger: silentLogger }).catch(
      (error: unknown) => error,
    )) as Error;
    expect(refused).toMatchObject({ name: 'ConfigError' });
    expect(refused.message).toContain('(DEPTH_ZERO_SELF_SIGNED_CERT: a self-signed certificate)');
  });

  it('refuses a cluster whose nodes mix redis: and rediss:', () => {
    expect(() => createClient({ redis: `${url},redis://127.0.0.1:6379`, prefix: 'tls-trust' })).toThrow(
      'REDIS_URL lists nodes with both redis: and rediss:; every node of a cluster speaks TLS (rediss:) or none does',
    );
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

describe('a Redis Cluster whose nodes are listed with rediss:', () => {
  let node: ChildProcess | undefined;
  let clusterDir = '';
  let port = 0;

  beforeAll(async () => {
    clusterDir = mkdtempSync(join(tmpdir(), 'arcflow-tls-cluster-'));
    const [key, cert] = [join(clusterDir, 'key.pem'), join(clusterDir, 'cert.pem')];
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'],
      {
        stdio: 'ignore',
      },
    );
    port = await freePort();
    const bus = await freePort();
    // One master that holds every slot, speaking TLS only (its cluster bus too, on a port known free).
    node = spawn(
      'redis-server',
      [
        ...[
          '--port',
          '0',
          '--tls-port',
          String(port),
          '--cluster-port',
          String(bus),
          '--bind',
          '127.0.0.1',
          '--tls-cert-file',
          cert,
          '--tls-key-file',
          key,
          '--tls-ca-cert-file',
          cert,
        ],
        ...['--tls-auth-clients', 'no', '--tls-cluster', 'yes', '--cluster-enabled', 'yes', '--cluster-announce-ip', '127.0.0.1'],
        ...['--cluster-config-file', 'nodes.conf', '--save', '', '--appendonly', 'no', '--dir', clusterDir],
      ],
      { stdio: 'ignore' },
    );
    await listening(port);
    execFileSync('redis-cli', ['--tls', '--cacert', cert, '-p', String(port), 'cluster', 'addslotsrange', '0', '16383'], { stdio: 'ignore' });
  });

  afterAll(() => {
    node?.kill('SIGKILL');
    rmSync(clusterDir, { recursive: true, force: true });
  });

  it('connects to every node over TLS, trusting the CA that NODE_EXTRA_CA_CERTS names', async () => {
    const nodes = `rediss://127.0.0.1:${port},rediss://127.0.0.1:${port}`;
    const read = await runFixture(TLS_CLUSTER_CLIENT, [], { REDIS_URL: nodes, ARCFLOW_PREFIX: 'tls-cluster', NODE_EXTRA_CA_CERTS: join(clusterDir, 'cert.pem') });
    expect(JSON.parse(read)).toEqual({ runs: [] });
  });
});

const TLS_CLUSTER_CLIENT = fileURLToPath(new URL('./fixtures/tls-cluster-client.ts', import.meta.url));
