import { type WorkerProcess, spawnWorker } from '@arcflow/worker';

/**
 * The chaos runs' worker processes on one fixture: started, and (once `killEvery` is called) one
 * of them SIGKILLed at random every so often and replaced, until `stop`.
 */
export class WorkerFleet {
  private readonly workers: WorkerProcess[] = [];
  private stopping = false;
  private killer: Promise<void> = Promise.resolve();
  /** How many workers were SIGKILLed. */
  kills = 0;

  constructor(
    private readonly fixture: string,
    private readonly env: Record<string, string>,
    private readonly log: (line: string) => void,
  ) {}

  async start(count: number): Promise<void> {
    for (let index = 0; index < count; index += 1) await this.startOne();
  }

  /**
   * Kills a random worker every `ms` (the first soon, while everything is still moving), whatever a
   * worker takes to start: its replacement starts beside the others.
   */
  killEvery(ms: number): void {
    this.killer = (async () => {
      const starting: Promise<void>[] = [];
      for (let wait = ms / 4; !this.stopping; wait = ms) {
        await new Promise((resolve) => setTimeout(resolve, wait));
        if (this.stopping) break;
        const victim = this.workers.splice(Math.floor(Math.random() * this.workers.length), 1)[0];
        if (victim) {
          victim.kill('SIGKILL');
          this.kills += 1;
          this.log(`killed worker ${victim.id}`);
        }
        starting.push(this.startOne().catch((error: unknown) => this.log(`a new worker failed to start: ${(error as Error).message}`)));
      }
      await Promise.all(starting);
    })();
  }

  /** Stops killing (waits for a kill under way); the workers keep running. */
  async stopKilling(): Promise<void> {
    this.stopping = true;
    await this.killer;
  }

  /** Stops killing and SIGKILLs every worker. */
  killAll(): void {
    this.stopping = true;
    for (const worker of this.workers.splice(0)) worker.kill('SIGKILL');
  }

  private async startOne(): Promise<void> {
    this.workers.push(await spawnWorker(this.fixture, { env: this.env, readyTimeoutMs: 60_000 }));
  }
}
