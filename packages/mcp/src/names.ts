import { createHash } from 'node:crypto';
import { ConfigError, NamePattern, nearestKey } from '@arcflow/core';

const MAX_NAME = 64;
/** Characters kept before the hash when a name is cut to fit. */
const CUT_AT = 55;

/**
 * The arcflow name of a server's tool: `prefix` and the server's name, each character outside
 * arcflow's tool-name rules (letters, digits, `_`, `-`) made `_`; a name over 64 characters is cut
 * and ends with 8 hex characters of a hash of the whole name, so two long names stay apart.
 * A server's names are untrusted: `undefined` when nothing usable is left.
 */
export function arcflowToolName(prefix: string, serverName: string): string | undefined {
  if (typeof serverName !== 'string' || serverName === '') return undefined;
  const mapped = `${prefix}${serverName}`.replace(/[^A-Za-z0-9_-]/g, '_');
  const name = mapped.length <= MAX_NAME ? mapped : `${mapped.slice(0, CUT_AT)}_${createHash('sha256').update(`${prefix}${serverName}`).digest('hex').slice(0, 8)}`;
  return NamePattern.tool.test(name) ? name : undefined;
}

/** One of the server's tools chosen for arcflow, under both names. */
export interface SelectedName {
  /** The name the server knows it by (what a call sends). */
  readonly server_name: string;
  /** The arcflow tool's name. */
  readonly name: string;
}

export interface Selection {
  readonly server: string;
  readonly prefix: string;
  readonly include: readonly string[] | undefined;
  readonly exclude: readonly string[];
  /** Names `tools` gives options for: each must be one the server lists. */
  readonly configured: readonly string[];
}

/**
 * Chooses the listed tools `include` and `exclude` leave, and names them. Refused, each with a
 * message naming the server: `include` or `tools` naming a tool the server does not list (with
 * the nearest name it does list), a name that maps to nothing, and two tools that map to one
 * arcflow name. `exclude` may name tools the server no longer lists.
 */
export function selectTools(listed: readonly string[], selection: Selection): SelectedName[] {
  const where = `mcpTools '${selection.server}'`;
  const known = new Set(listed);
  for (const [key, wanted] of [
    ['include', selection.include ?? []],
    ['tools', selection.configured],
  ] as const) {
    for (const name of wanted) {
      if (known.has(name)) continue;
      const nearest = nearestKey(name, listed);
      const hint = nearest ? `; did you mean '${nearest}'?` : ` (it lists: ${listed.slice(0, 20).join(', ') || 'none'}${listed.length > 20 ? ', …' : ''})`;
      throw new ConfigError(`${where}: ${key} names '${clip(name)}', a tool the server does not list${hint}`);
    }
  }
  const chosen = listed.filter((name) => (selection.include === undefined || selection.include.includes(name)) && !selection.exclude.includes(name));
  const byName = new Map<string, string>();
  const selected: SelectedName[] = [];
  for (const server_name of chosen) {
    const name = arcflowToolName(selection.prefix, server_name);
    if (name === undefined) throw new ConfigError(`${where}: the server's tool ${JSON.stringify(server_name.slice(0, 64))} has no usable name; exclude it`);
    const earlier = byName.get(name);
    if (earlier !== undefined) {
      throw new ConfigError(
        `${where}: the server's tools '${clip(earlier)}' and '${clip(server_name)}' both become the tool name '${name}' (arcflow names use letters, digits, _ and -); exclude one of them`,
      );
    }
    byName.set(name, server_name);
    selected.push({ server_name, name });
  }
  return selected;
}

/** A name from a server, cut for a message. */
function clip(name: string): string {
  return name.length > MAX_NAME ? `${name.slice(0, MAX_NAME)}…` : name;
}
