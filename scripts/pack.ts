// `npm run pack`: builds every package (TypeScript project references: JavaScript, .d.ts and
// source maps in each package's dist/), stages what is published under build/npm/<package>/
// (package.json with exports to dist, pinned internal versions, license, files), and packs each
// into build/tarballs/. Users install `arcflow`; the other packages are its dependencies.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BUILD = join(root, 'build');
const VERSION = (JSON.parse(readFileSync(join(root, 'packages/arcflow/package.json'), 'utf8')) as { version: string }).version;

/** Where each published package's sources live. */
const PACKAGES = ['packages/core', 'packages/telemetry', 'packages/provider-openai', 'packages/queue', 'packages/testing', 'apps/worker', 'apps/cli', 'packages/arcflow'];

/** Exports that are for the monorepo's own tests, never published. */
const UNPUBLISHED_EXPORTS: Readonly<Record<string, readonly string[]>> = { '@arcflow/testing': ['./scenarios'] };

/** The command a published package runs: the built CLI, with TypeScript support for users' modules. */
const CLI_BIN = `#!/usr/bin/env -S node --max-semi-space-size=32
// The arcflow command, from the built CLI. tsx is registered so a user's module may be .ts.
// The shebang's Node flags are the worker's (WORKER_NODE_FLAGS in @arcflow/worker).
import { register } from 'tsx/esm/api';

register();
await import('../dist/main.js');
`;
const ARCFLOW_BIN = `#!/usr/bin/env -S node --max-semi-space-size=32
// The arcflow command (see @arcflow/cli).
await import('@arcflow/cli/bin');
`;

interface Manifest {
  name: string;
  version: string;
  exports: Record<string, string>;
  dependencies?: Record<string, string>;
  [key: string]: unknown;
}

function run(command: string, args: string[], cwd = root): string {
  return execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

/** `./src/x.ts` → `{ types: './dist/x.d.ts', default: './dist/x.js' }`. */
function builtExport(source: string): { types: string; default: string } {
  const base = source.replace(/^\.\/src\//, './dist/').replace(/\.ts$/, '');
  return { types: `${base}.d.ts`, default: `${base}.js` };
}

function publishedManifest(source: Manifest, dir: string): Record<string, unknown> {
  const hidden = UNPUBLISHED_EXPORTS[source.name] ?? [];
  const exports: Record<string, unknown> = {};
  for (const [key, target] of Object.entries(source.exports)) if (!hidden.includes(key)) exports[key] = builtExport(target);
  const dependencies: Record<string, string> = {};
  for (const [name, range] of Object.entries(source.dependencies ?? {})) dependencies[name] = name === 'arcflow' || name.startsWith('@arcflow/') ? VERSION : range;
  const files = ['dist', 'README.md', 'LICENSE'];
  const manifest: Record<string, unknown> = {
    name: source.name,
    version: VERSION,
    description: source.description ?? `Part of arcflow, a durable runtime for LLM agent tool loops on BullMQ and Redis (install \`arcflow\`).`,
    license: 'Apache-2.0',
    type: 'module',
    engines: { node: '>=20' },
    exports,
    files,
    dependencies,
  };
  if (dir === 'apps/cli') {
    exports['./bin'] = './bin/arcflow.js';
    manifest.bin = { arcflow: './bin/arcflow.js' };
    files.push('bin', 'examples');
  }
  if (dir === 'packages/arcflow') {
    manifest.bin = { arcflow: './bin/arcflow.js' };
    files.push('bin');
    dependencies['@arcflow/cli'] = VERSION;
  }
  return manifest;
}

rmSync(BUILD, { recursive: true, force: true });
for (const dir of PACKAGES) rmSync(join(root, dir, 'dist'), { recursive: true, force: true });
process.stderr.write('pack: tsc -b tsconfig.build.json\n');
run(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-b', 'tsconfig.build.json']);
// The store's Lua scripts are read at run time, next to the module that loads them.
cpSync(join(root, 'packages/queue/src/store/commands'), join(root, 'packages/queue/dist/store/commands'), { recursive: true });

mkdirSync(join(BUILD, 'tarballs'), { recursive: true });
for (const dir of PACKAGES) {
  const source = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8')) as Manifest;
  const staged = join(BUILD, 'npm', source.name.replace('/', '__'));
  mkdirSync(staged, { recursive: true });
  cpSync(join(root, dir, 'dist'), join(staged, 'dist'), { recursive: true, filter: (path) => !path.endsWith('.tsbuildinfo') });
  cpSync(join(root, 'LICENSE'), join(staged, 'LICENSE'));
  cpSync(existsSync(join(root, dir, 'README.md')) ? join(root, dir, 'README.md') : join(root, 'README.md'), join(staged, 'README.md'));
  if (dir === 'apps/cli') {
    mkdirSync(join(staged, 'bin'));
    writeFileSync(join(staged, 'bin/arcflow.js'), CLI_BIN, { mode: 0o755 });
    mkdirSync(join(staged, 'examples'));
    cpSync(join(root, 'examples/weather-agent.ts'), join(staged, 'examples/weather-agent.ts'));
  }
  if (dir === 'packages/arcflow') {
    mkdirSync(join(staged, 'bin'));
    writeFileSync(join(staged, 'bin/arcflow.js'), ARCFLOW_BIN, { mode: 0o755 });
  }
  writeFileSync(join(staged, 'package.json'), `${JSON.stringify(publishedManifest(source, dir), null, 2)}\n`);
  const tarball = run('npm', ['pack', '--silent', '--pack-destination', join(BUILD, 'tarballs')], staged)
    .trim()
    .split('\n')
    .at(-1)!;
  process.stderr.write(`pack: ${tarball}\n`);
}
