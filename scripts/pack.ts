// `npm run pack`: builds once, then packs every published package into build/tarballs/ (what
// `npm pack` in each package would give). Users install `arcflow`; the others are its dependencies.
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PACKAGES } from './packages.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const tarballs = join(root, 'build/tarballs');
rmSync(tarballs, { recursive: true, force: true });
mkdirSync(tarballs, { recursive: true });
execFileSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: 'inherit' });
for (const dir of PACKAGES) {
  const name = execFileSync('npm', ['pack', '--silent', '--ignore-scripts', '--pack-destination', tarballs], { cwd: join(root, dir), encoding: 'utf8' }).trim();
  process.stderr.write(`pack: ${name}\n`);
}
