// The SSE clients of the viewers bench (viewers.ts), in a process of their own so that reading
// thousands of sockets does not hold up the bench's worker and model server, nor they the
// clients. Told over IPC to open `clients` streams of a run; answers `open` once every stream has
// begun, then `done` with each client's time of its first text frame (CLOCK_MONOTONIC, in ms,
// comparable across processes).
import net from 'node:net';

/** Clients connected at once, each wave waiting for the last to be served. */
const WAVE = 250;

const TEXT = Buffer.from('event: text');
const END = Buffer.from('event: end');

const now = () => Number(process.hrtime.bigint()) / 1e6;

function viewer(url: URL, run_id: string) {
  const socket = net.connect(Number(url.port), url.hostname);
  let firstText: number | undefined;
  /** The last bytes of the previous read, where a marker may have begun. */
  let tail: Buffer | undefined;
  let opened: () => void;
  const open = new Promise<void>((resolve) => {
    opened = resolve;
  });
  const done = new Promise<number | undefined>((resolve, reject) => {
    socket.on('connect', () => socket.write(`GET /v1/runs/${run_id}/stream HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`));
    socket.on('data', (data: Buffer) => {
      // The clock is read before anything else: what this process spends on a read is not the server's.
      const at = now();
      const seen = tail === undefined ? data : Buffer.concat([tail, data]);
      if (firstText === undefined && seen.includes(TEXT)) firstText = at;
      opened();
      if (seen.includes(END)) {
        socket.destroy();
        resolve(firstText);
      }
      tail = data.subarray(-16);
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(firstText));
  });
  return { open, done };
}

process.on('message', async (message: { url: string; run_id: string; clients: number }) => {
  const url = new URL(message.url);
  const viewers: ReturnType<typeof viewer>[] = [];
  for (let at = 0; at < message.clients; at += WAVE) {
    const wave = Array.from({ length: Math.min(WAVE, message.clients - at) }, () => viewer(url, message.run_id));
    viewers.push(...wave);
    await Promise.all(wave.map((each) => each.open));
  }
  process.send!({ type: 'open' });
  const firsts = await Promise.all(viewers.map((each) => each.done));
  process.send!({ type: 'done', firsts });
});
process.send!({ type: 'ready' });
