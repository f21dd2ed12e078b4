import { isIP } from 'node:net';
import { type ConnectionOptions, connect as connectTls } from 'node:tls';
import { ConfigError } from '@arcflow/core';
import type { Cluster, Redis } from 'ioredis';

/** Node's codes for a TLS certificate that no CA this process trusts has signed, and what each means. */
const UNTRUSTED: Readonly<Record<string, string>> = {
  DEPTH_ZERO_SELF_SIGNED_CERT: 'a self-signed certificate',
  SELF_SIGNED_CERT_IN_CHAIN: 'a self-signed certificate in its chain',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'a certificate signed by a CA this process does not know',
  UNABLE_TO_GET_ISSUER_CERT: 'a certificate signed by a CA this process does not know',
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: 'a certificate signed by a CA this process does not know',
  CERT_UNTRUSTED: 'a certificate this process does not trust',
};

/**
 * The error for a Redis whose TLS certificate this process does not trust, saying how to trust it;
 * undefined for any other error. `reason` is the error's code (or its text, which names the code).
 * `where` names the Redis, its password hidden.
 */
export function untrustedCertificate(reason: string, where: string): ConfigError | undefined {
  const code = Object.keys(UNTRUSTED).find((known) => reason === known || reason.includes(known));
  if (!code) return undefined;
  return new ConfigError(
    `${where} presents a TLS certificate this process does not trust (${code}: ${UNTRUSTED[code]}); to trust it, start the process with NODE_EXTRA_CA_CERTS=/path/to/ca.pem, the certificate of the CA that signed it (for a self-signed certificate, the certificate itself)`,
  );
}

/**
 * Rejects with `refusal(error)` at the first connection error that `refusal` says no retry will
 * change (a certificate not trusted): a connection that retries forever would otherwise wait
 * silently. `stop` ends the watch.
 */
export function refusedConnection(redis: Redis, refusal: (error: Error) => Error | undefined): { refused: Promise<never>; stop(): void } {
  let listener: ((error: Error) => void) | undefined;
  const refused = new Promise<never>((_resolve, reject) => {
    listener = (error: Error) => {
      const refusedWith = refusal(error);
      if (refusedWith) reject(refusedWith);
    };
    redis.on('error', listener);
  });
  refused.catch(() => undefined);
  return { refused, stop: () => redis.off('error', listener!) };
}

/** How long a cluster's trust probe waits for a node's handshake, and at least how long between two probes. */
const PROBE_MS = 5_000;

/**
 * A Redis Cluster client reports a node whose certificate it does not trust only as `Failed to
 * refresh slots cache` (the TLS error itself is not passed on). When that happens, one handshake
 * with the first listed node, with the same trust, finds out why; a certificate not trusted is
 * then reported on `cluster` as an `error` with the certificate's code, as one Redis reports it.
 */
export function reportUntrustedCertificates(cluster: Cluster, node: { readonly host: string; readonly port: number }, tls: ConnectionOptions): void {
  let probing = false;
  let last = 0;
  cluster.on('error', (error: Error) => {
    if (probing || Date.now() - last < PROBE_MS || !/Failed to refresh slots cache/.test(error.message)) return;
    probing = true;
    last = Date.now();
    const socket = connectTls({ ...tls, host: node.host, port: node.port, ...(isIP(node.host) ? {} : { servername: node.host }) });
    let settled = false;
    const done = (code?: unknown) => {
      if (settled) return;
      settled = true;
      probing = false;
      socket.destroy();
      if (typeof code === 'string' && Object.hasOwn(UNTRUSTED, code)) {
        cluster.emit('error', Object.assign(new Error(`${code}: the certificate of ${node.host}:${node.port}`), { code }));
      }
    };
    socket.once('secureConnect', () => done());
    // Every error: a handshake refused here may be followed by the server's alert.
    socket.on('error', (failure: Error) => done((failure as { code?: unknown }).code));
    socket.setTimeout(PROBE_MS, () => done());
  });
}
