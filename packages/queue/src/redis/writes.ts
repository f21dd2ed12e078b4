import type { Socket } from 'node:net';
import { Cluster, type Redis } from 'ioredis';

const COALESCING = Symbol('arcflow.coalescing');
type CoalescingSocket = Socket & { [COALESCING]?: true };

/**
 * Sends the commands a connection issues in one burst of synchronous work (one tick, with its
 * promise continuations) in one socket write: the tick's first write corks the socket and the
 * tick's end uncorks it. Commands and their order are unchanged; only the syscalls are fewer.
 * Each syscall on loopback also wakes Redis, so on a busy worker this saves CPU on both sides
 * (measured: see docs/architecture.md, "Cost per run"). On a cluster client, each node's
 * connection is patched.
 */
export function coalesceWrites(redis: Redis): Redis {
  // A cluster client writes through a connection per node, made as the client learns the nodes.
  if ((redis as unknown) instanceof Cluster) {
    const cluster = redis as unknown as Cluster;
    cluster.on('+node', (node: Redis) => coalesceWrites(node));
    for (const node of cluster.nodes('all')) coalesceWrites(node);
    return redis;
  }
  const patch = () => {
    const socket = redis.stream as CoalescingSocket | undefined;
    if (!socket || socket[COALESCING]) return;
    socket[COALESCING] = true;
    const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
    let corked = false;
    const uncork = () => {
      corked = false;
      socket.uncork();
    };
    socket.write = ((...args: unknown[]) => {
      if (!corked) {
        corked = true;
        socket.cork();
        process.nextTick(uncork);
      }
      return write(...args);
    }) as Socket['write'];
  };
  // Every (re)connect makes a new socket; ioredis emits `connect` before it sends anything on it.
  redis.on('connect', patch);
  patch();
  return redis;
}
