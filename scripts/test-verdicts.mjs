// A reporter for `node --test`, beside the one that prints: every test
// that a file announced (`test:enqueue`) must come back with a verdict
// (`test:pass` or `test:fail`). Each file runs in a process of its own,
// whose reports reach the runner through a pipe; a process that exits
// before the pipe is drained takes the last of them with it, and the run
// would count fewer tests, with no failure. A file whose reports fall
// short fails the run here, naming the tests it never heard of again.
//
//   node --test --test-reporter=spec --test-reporter-destination=stdout \
//     --test-reporter=./scripts/test-verdicts.mjs --test-reporter-destination=stderr ...

export default async function* verdicts(source) {
  // By file: each test announced and not judged yet, by its place and name.
  const waiting = new Map();
  let lost = 0;

  for await (const { type, data } of source) {
    // The run's own plan and summary have no file.
    if (data == null || data.file == null) continue;

    // The file itself, done: all it announced should have been judged.
    if (data.name === data.file) {
      if (type === "test:complete") {
        const tests = [...(waiting.get(data.file) ?? new Map()).keys()];
        waiting.delete(data.file);

        if (tests.length > 0) {
          lost += tests.length;
          process.exitCode = 1;
          yield `\nlost reports: ${data.file} announced ${tests.length} tests it never ` +
            "reported, passed or failed:\n" + tests.map((test) => `  ${test}\n`).join("");
        }
      }

      continue;
    }

    const tests = waiting.get(data.file) ?? new Map();
    waiting.set(data.file, tests);
    const key = `${data.line}:${data.column} ${"  ".repeat(data.nesting)}${data.name}`;

    if (type === "test:enqueue") {
      tests.set(key, (tests.get(key) ?? 0) + 1);
    } else if (type === "test:pass" || type === "test:fail") {
      const count = (tests.get(key) ?? 0) - 1;
      if (count > 0) tests.set(key, count);
      else tests.delete(key);
    }
  }

  if (lost > 0) yield `\nlost reports: ${lost} tests in all; the run fails\n`;
}
