import type { StoreContext } from '../store-context.ts';

/**
 * Providers paused by a 429 (SPEC §16), for every worker of the prefix: one key per provider id
 * that lives as long as the pause, by the server's clock. A worker reads the pauses of a call's
 * providers before it calls; only the calls of a paused provider wait.
 */
export class ProviderPauses {
  constructor(private readonly context: StoreContext) {}

  /** Pauses `provider_id` for `ms` from now (a longer pause already holding stands). */
  async pause(provider_id: string, ms: number): Promise<void> {
    await this.context.scripts.pauseProvider([this.context.keys.providerPause(provider_id)], [Math.max(1, Math.ceil(ms))]);
  }

  /** How long each of `provider_ids` stays paused from now, in ms (0 for one that is not paused). */
  async remaining(provider_ids: readonly string[]): Promise<Map<string, number>> {
    const ids = [...new Set(provider_ids)];
    const pipeline = this.context.redis.pipeline();
    for (const id of ids) pipeline.pttl(this.context.keys.providerPause(id));
    const replies = (await pipeline.exec()) ?? [];
    return new Map(
      ids.map((id, at) => {
        const [error, left] = replies[at] ?? [];
        if (error) throw error;
        return [id, typeof left === 'number' && left > 0 ? left : 0];
      }),
    );
  }
}
