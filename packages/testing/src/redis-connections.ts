import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import type { Redis } from 'ioredis';

/**
 * How many connections a process holds to the Redis `redis` is connected to, as Redis counts
 * them (Linux): the entries of `CLIENT LIST` whose address is the local end of one of the
 * process's TCP sockets to `redisPort`. Other processes' connections (other tests on a shared
 * Redis) are not counted.
 */
export async function redisConnectionsOf(pid: number, redis: Redis, redisPort = 6379): Promise<number> {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
      if (inode) inodes.add(inode);
    } catch {
      // Closed meanwhile.
    }
  }
  const ports = new Set<number>();
  for (const table of ['tcp', 'tcp6']) {
    for (const line of readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10 || !inodes.has(fields[9]!)) continue;
      const local = fields[1]!.split(':').at(-1)!;
      const remote = fields[2]!.split(':').at(-1)!;
      if (Number.parseInt(remote, 16) === redisPort) ports.add(Number.parseInt(local, 16));
    }
  }
  const list = (await redis.client('LIST')) as string;
  return list.split('\n').filter((line) => {
    const port = /(?:^| )addr=\S+:(\d+)/.exec(line)?.[1];
    return port !== undefined && ports.has(Number(port));
  }).length;
}
