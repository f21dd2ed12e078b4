import type { CodeBlock } from './extract.ts';

/** A command line of a shell block, as words (quotes removed), with the page line it starts on. */
export interface CommandLine {
  readonly line: number;
  readonly words: readonly string[];
}

const SEPARATORS = new Set(['|', '||', '&&', ';', '&']);

/**
 * The command lines of a `sh`/`bash` block (every line) or a `console` block (the lines after `$ `),
 * split into words as a shell would: quotes may span lines, `\` continues a line, `#` starts a comment.
 */
export function commandLines(block: CodeBlock): CommandLine[] {
  const text = block.code;
  const prompted = block.lang === 'console';
  const found: CommandLine[] = [];
  let line = block.line;
  let at = 0;
  while (at < text.length) {
    const lineEnd = text.indexOf('\n', at);
    const startsCommand = !prompted || text.startsWith('$ ', at);
    if (!startsCommand) {
      at = lineEnd === -1 ? text.length : lineEnd + 1;
      line += 1;
      continue;
    }
    const start = line;
    const words: string[] = [];
    let word: string | undefined;
    let quote: string | undefined;
    let index = prompted ? at + 2 : at;
    for (; index < text.length; index++) {
      const char = text[index]!;
      if (char === '\n') line += 1;
      if (quote) {
        if (char === quote) quote = undefined;
        else word += char;
      } else if (char === "'" || char === '"') {
        quote = char;
        word ??= '';
      } else if (char === '\\' && text[index + 1] === '\n') {
        index += 1;
        line += 1;
      } else if (char === '\n') {
        break;
      } else if (char === ' ' || char === '\t') {
        if (word !== undefined) words.push(word);
        word = undefined;
      } else if (char === '#' && word === undefined) {
        const end = text.indexOf('\n', index);
        index = (end === -1 ? text.length : end) - 1;
      } else {
        word = (word ?? '') + char;
      }
    }
    if (word !== undefined) words.push(word);
    found.push({ line: start, words });
    at = index + 1;
  }
  return found;
}

/** The commands `arcflow help` lists, each with the flags its lines name. */
export function helpCommands(help: string): Map<string, Set<string>> {
  const commands = new Map<string, Set<string>>();
  let current: Set<string> | undefined;
  // The commands' lines, up to the environment's (which names commands too).
  const lines = help.split('\n');
  const end = lines.findIndex((line) => line.startsWith('environment:'));
  for (const line of lines.slice(0, end === -1 ? lines.length : end)) {
    const command = /^ {2}([a-z][a-z-]*)\b/.exec(line);
    if (command) {
      // A command may have several lines (`runs …` and `runs retry|cancel …`): their flags add up.
      current = commands.get(command[1]!) ?? new Set();
      commands.set(command[1]!, current);
    } else if (!/^ {3,}/.test(line)) {
      current = undefined;
    }
    for (const flag of line.match(/--[a-z][a-z-]*/g) ?? []) current?.add(flag);
  }
  return commands;
}

/** What is wrong with the `arcflow` invocations and `npm run` scripts of a command line. */
export function commandProblems(command: CommandLine, arcflow: ReadonlyMap<string, ReadonlySet<string>>, scripts: ReadonlySet<string>): string[] {
  const problems: string[] = [];
  const { words } = command;
  words.forEach((word, index) => {
    const before = words[index - 1];
    if (word === 'arcflow' && (before === undefined || before === 'npx' || SEPARATORS.has(before) || /^[A-Z_]+=/.test(before))) {
      const name = words[index + 1];
      if (name === undefined || name === '--version' || name === '--help') return;
      const flags = arcflow.get(name);
      if (!flags) {
        problems.push(`arcflow has no command '${name}'`);
        return;
      }
      for (const argument of words.slice(index + 2)) {
        if (SEPARATORS.has(argument)) break;
        const flag = /^--[a-z][a-z-]*/.exec(argument)?.[0];
        if (flag && !flags.has(flag)) problems.push(`arcflow ${name} has no flag ${flag}`);
      }
    }
    if (word === 'npm' && words[index + 1] === 'run' && words[index + 2] && !scripts.has(words[index + 2]!)) problems.push(`package.json has no script '${words[index + 2]}'`);
  });
  return problems;
}
