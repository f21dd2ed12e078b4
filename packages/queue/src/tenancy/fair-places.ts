/**
 * The jobs a store script places among the tenants in its own call (`fairPlace` in
 * redis/lua/fair.lua): the script that records what decides a run's next jobs gives their BullMQ
 * priorities too, so adding them costs no call to the fair clock of its own. Only jobs whose queue
 * lives under the run's hash tag are placed so (the script runs in the run's slot).
 */
export interface FairPlacing {
  readonly tenant: string;
  readonly level: number;
  /** 1 / the tenant's weight. */
  readonly stride: number;
  /** Each job as its id, then its queue's BullMQ key prefix (`<tag>:<queue>:`), in the order they are added. */
  readonly jobs: readonly string[];
}

/** The priorities a store script gave, by job id. */
export type FairPlaces = ReadonlyMap<string, number>;

/** A script's `job id, priority, …` JSON ('', nil or false for none) as places. */
export function readPlaces(json: unknown): FairPlaces | undefined {
  if (typeof json !== 'string' || json === '') return undefined;
  const flat = JSON.parse(json) as unknown;
  if (!Array.isArray(flat) || flat.length === 0) return undefined;
  const places = new Map<string, number>();
  for (let index = 0; index + 1 < flat.length; index += 2) places.set(String(flat[index]), Number(flat[index + 1]));
  return places;
}
