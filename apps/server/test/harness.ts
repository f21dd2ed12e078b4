import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { ARCFLOW_BIN } from '@arcflow/worker';
import { type Browser, type Page, chromium } from 'playwright-core';

export interface ServeProcess {
  readonly url: string;
  readonly child: ChildProcess;
  /** Everything it printed (its log). */
  readonly output: () => string;
  stop(): Promise<void>;
}

/** Starts `arcflow serve --port 0` as a real process and resolves with its address once it listens. */
export async function spawnServe(env: Record<string, string>, args: string[] = []): Promise<ServeProcess> {
  const child = spawn(process.execPath, [ARCFLOW_BIN, 'serve', '--port', '0', ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start:\n${output}`)), 30_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/\S+) /.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`serve exited (${code}):\n${output}`));
    });
  });
  return {
    url,
    child,
    output: () => output,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** One Server-Sent Events message. */
export interface SseMessage {
  id?: string;
  event?: string;
  data?: string;
}

/** Reads an SSE response: messages (and, separately, how many comment lines came) until `until` says stop or the stream ends. */
export async function readSse(response: Response, until: (message: SseMessage, all: SseMessage[]) => boolean = () => false): Promise<{ messages: SseMessage[]; comments: number }> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  const messages: SseMessage[] = [];
  let comments = 0;
  let buffer = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return { messages, comments };
    buffer += decoder.decode(value, { stream: true });
    let end = buffer.indexOf('\n\n');
    while (end !== -1) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      end = buffer.indexOf('\n\n');
      if (block.startsWith(':')) {
        comments += 1;
        continue;
      }
      const message: SseMessage = {};
      for (const line of block.split('\n')) {
        const colon = line.indexOf(':');
        const field = line.slice(0, colon);
        const text = line.slice(colon + 2);
        if (field === 'id' || field === 'event' || field === 'data') message[field] = text;
      }
      messages.push(message);
      if (until(message, messages)) {
        await reader.cancel();
        return { messages, comments };
      }
    }
  }
}

/** Debian's chromium (`.ci/run` installs it); CHROMIUM_PATH points elsewhere. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * A real headless Chromium for the console's tests. Without one it throws at once, not in the
 * promise: called first in a `Promise.all` of a suite's set-up, it stops the set-up before any
 * process of the suite is started (and left running, since the suite's variables are never set).
 */
export function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: install Debian's chromium (apt-get install chromium) or set CHROMIUM_PATH`);
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}

/** Signs the page in to the console at `url` with `key`, as a person would, and waits until it shows `who` (e.g. `ops (admin)`). */
export async function signIn(page: Page, url: string, key: string, who: string): Promise<void> {
  await page.goto(url);
  await page.fill('input[name=key]', key);
  await page.click('button[type=submit]');
  await page.getByText(who).waitFor();
}
