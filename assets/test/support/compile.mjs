// Lets node import the client's TypeScript modules: esbuild bundles one into
// a temporary ES module, which is then imported like any other.
import { build } from "esbuild";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const sourceDir = resolve(fileURLToPath(import.meta.url), "../../../src");
const libraryEntry = resolve(fileURLToPath(import.meta.url), "../../../../clients/js/src/index.ts");

/** Imports src/<name>.ts (with what it imports) and returns its exports. */
export function importSource(name) {
  return importBundle(join(sourceDir, `${name}.ts`), basename(name));
}

/** Imports the client library (clients/js) from its sources, as the page's build does. */
export function importLibrary() {
  return importBundle(libraryEntry, "grove-client-library");
}

async function importBundle(entry, name) {
  const dir = mkdtempSync(join(tmpdir(), "grove-client-"));
  const outfile = join(dir, `${name}.mjs`);
  try {
    await build({
      entryPoints: [entry],
      bundle: true,
      format: "esm",
      platform: "neutral",
      target: "es2022",
      outfile,
      logLevel: "warning",
    });
    return await import(pathToFileURL(outfile).href);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
