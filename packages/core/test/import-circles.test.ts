import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { describeCircles, findImportCircles, importGraph, workspaceSourceRoots } from '../../../scripts/import-circles.ts';

describe('import circles', () => {
  it('none among the sources of every package and app (type-only imports included)', () => {
    const roots = workspaceSourceRoots().map((root) => root.split(/[\\/]/).slice(-3, -1).join('/'));
    expect(roots).toEqual(expect.arrayContaining(['packages/core', 'packages/queue', 'packages/arcflow', 'apps/worker', 'apps/cli', 'apps/server']));
    const graph = importGraph(workspaceSourceRoots());
    // Imports are read: the public entry of core reaches its files.
    expect(graph.get([...graph.keys()].find((file) => file.endsWith('packages/core/src/index.ts'))!)?.length).toBeGreaterThan(30);
    const circles = findImportCircles();
    // The text names every file of every circle, and one loop through it.
    expect(describeCircles(circles)).toBe('');
  });

  describe('the check, on a small tree', () => {
    const root = mkdtempSync(join(tmpdir(), 'arcflow-circles-'));
    afterAll(() => rmSync(root, { recursive: true, force: true }));
    const write = (path: string, text: string) => {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), text);
    };
    // a → b (type only) → c (re-export) → a: a circle of three.
    write('src/a.ts', "import type { B } from './b.ts';\nexport type A = B;\nexport const a = 1;\n");
    write('src/b.ts', "export { c } from './c.ts';\nexport type B = number;\n");
    write('src/c.ts', "import { a } from './a.js';\nexport const c = a;\n");
    // d → e statically; e loads d lazily with import(): a lazy load is not an edge.
    write('src/d.ts', "import { e } from './e.ts';\nexport const d = e;\n");
    write('src/e.ts', "export const e = 1;\nexport const later = () => import('./d.ts');\n");
    // f → g through an import('…') type; g → f through a folder's index.
    write('src/f/index.ts', "export type F = import('../g.ts').G;\n");
    write('src/g.ts', "import type { F } from './f';\nexport type G = F | string;\n");
    // A package name resolved to its source: h → @fixture/other → h.
    write('src/h.ts', "import { other } from '@fixture/other';\nexport const h = other;\n");
    write('other/src/index.ts', "import type { h } from '../../src/h.ts';\nexport const other = 1 as unknown as typeof h;\n");
    // A package outside the workspace is not followed.
    write('src/i.ts', "import { readFileSync } from 'node:fs';\nexport const i = readFileSync;\n");
    const aliases = new Map([['@fixture/other', join(root, 'other/src/index.ts')]]);

    it('finds each circle, with its files and one loop, and nothing else', () => {
      const circles = findImportCircles([join(root, 'src'), join(root, 'other/src')], root, aliases);
      expect(circles).toEqual([
        { files: ['other/src/index.ts', 'src/h.ts'], loop: ['other/src/index.ts', 'src/h.ts', 'other/src/index.ts'] },
        { files: ['src/a.ts', 'src/b.ts', 'src/c.ts'], loop: ['src/a.ts', 'src/b.ts', 'src/c.ts', 'src/a.ts'] },
        { files: ['src/f/index.ts', 'src/g.ts'], loop: ['src/f/index.ts', 'src/g.ts', 'src/f/index.ts'] },
      ]);
      expect(describeCircles(circles)).toContain('Import circle 2 (3 files):\n  src/a.ts\n  src/b.ts\n  src/c.ts\n  one loop: src/a.ts -> src/b.ts -> src/c.ts -> src/a.ts');
    });

    it('finds none once the circles are broken', () => {
      write('src/c.ts', 'export const c = 1;\n');
      write('src/g.ts', 'export type G = string;\n');
      write('other/src/index.ts', 'export const other = 1;\n');
      expect(findImportCircles([join(root, 'src'), join(root, 'other/src')], root, aliases)).toEqual([]);
    });
  });
});
