// The version of the npm packages is set once, by the repository's VERSION
// file (docs/operations.md, "Releases"); `make npm-pack` stamps it into each
// package it packs.
//
//   node stamp.mjs <package.json> <version>
//     sets "version", and every "@acpx-sidecar/*" optionalDependency, to
//     <version>, in place;
//   node stamp.mjs --check <client dir>
//     fails unless the client's optionalDependencies are exactly the
//     platform packages under <client dir>/npm/ (by their names).
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const args = process.argv.slice(2);
if (args[0] === "--check") {
  const dir = args[1];
  const client = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  const want = readdirSync(join(dir, "npm"))
    .map((d) => JSON.parse(readFileSync(join(dir, "npm", d, "package.json"), "utf8")).name)
    .sort();
  const got = Object.keys(client.optionalDependencies ?? {}).sort();
  if (JSON.stringify(want) !== JSON.stringify(got)) {
    console.error(`stamp: the client's optionalDependencies ${JSON.stringify(got)} are not the platform packages ${JSON.stringify(want)}`);
    process.exit(1);
  }
} else {
  const [file, version] = args;
  if (!file || !/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(version ?? "")) {
    console.error("usage: stamp.mjs <package.json> <semver> | --check <client dir>");
    process.exit(2);
  }
  const pkg = JSON.parse(readFileSync(file, "utf8"));
  pkg.version = version;
  for (const name of Object.keys(pkg.optionalDependencies ?? {})) {
    if (name.startsWith("@acpx-sidecar/")) pkg.optionalDependencies[name] = version;
  }
  writeFileSync(file, JSON.stringify(pkg, null, 2) + "\n");
}
