import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface ConsoleAssets {
  readonly 'index.html': string;
  readonly 'app.js': string;
  readonly 'app.css': string;
}

/** Built at package time next to the server's code (`dist/console/`). */
const BUILT = new URL('./console/', import.meta.url);
/** The console's sources, in the repository. */
const SOURCES = new URL('../console/', import.meta.url);

/**
 * The console's files: the built bundle when the server runs from its package; in the repository
 * (running from sources), bundled now from `apps/server/console/` with esbuild (which tsx, the
 * command's TypeScript loader, brings).
 */
export async function loadConsoleAssets(): Promise<ConsoleAssets> {
  if (existsSync(new URL('app.js', BUILT))) return readAssets(BUILT, readFileSync(new URL('app.js', BUILT), 'utf8'));
  return readAssets(SOURCES, await bundleConsole());
}

/** Bundles the console's script (Preact, minified, no source maps) and returns it. */
export async function bundleConsole(outfile?: string): Promise<string> {
  const { build } = await import('esbuild');
  const result = await build({
    entryPoints: [fileURLToPath(new URL('app.tsx', SOURCES))],
    bundle: true,
    minify: true,
    format: 'esm',
    target: 'es2022',
    jsx: 'automatic',
    jsxImportSource: 'preact',
    write: outfile !== undefined,
    ...(outfile ? { outfile } : {}),
    logLevel: 'silent',
  });
  return outfile ? readFileSync(outfile, 'utf8') : result.outputFiles![0]!.text;
}

function readAssets(from: URL, script: string): ConsoleAssets {
  return { 'index.html': readFileSync(new URL('index.html', from), 'utf8'), 'app.css': readFileSync(new URL('app.css', from), 'utf8'), 'app.js': script };
}
