// A Node host for acpx-sidecar in one screen: open an agent session, run one
// prompt whose shell command the host approves when asked, read the status,
// close (cleanup proof) and shut down. Usage, in a project that has
// installed @acpx-sidecar/client and its platform package (README.md, Node
// hosts: from `make npm-pack`'s tarballs):
//   node host.mjs < job.json
// job.json: {stateDir, sessionKey, agent, command: {path, args}, cwd, env, prompt}
// (env holds the agent's API key: it is passed on stdin, never printed).
// The last line is a JSON summary; the exit status is 0 when all went well.
import { readFileSync } from "node:fs";
import { spawnSidecar, resolveBinary, selectKind, textOf } from "@acpx-sidecar/client";

const job = JSON.parse(readFileSync(0, "utf8"));
/** @type {{binary: string, asked: string[], updates: number, turn?: import("@acpx-sidecar/client").PromptResult,
 *   status?: {state: string, lastRequestId: string | null}, proof?: import("@acpx-sidecar/client").CleanupProof,
 *   shutdownProofs?: import("@acpx-sidecar/client").CleanupProof[], sidecarPid?: number, exitCode?: number | null}} */
const summary = { binary: resolveBinary(), asked: [], updates: 0 };
const sidecar = await spawnSidecar({
  stateDir: job.stateDir,
  // The policy escalates what it does not approve itself; this host allows it once.
  onPermissionRequest: (req) => {
    console.log(`permission asked: ${req.kind} (${req.rule}) -> allow_once`);
    summary.asked.push(req.kind);
    return selectKind(req, "allow_once");
  },
});
sidecar.on("proof", (p) => console.log(`cleanup/proof ${p.origin}: complete=${p.complete}`));
try {
  const session = await sidecar.open({
    sessionKey: job.sessionKey, agent: job.agent, command: job.command, cwd: job.cwd, env: job.env,
    permissionMode: "approve-reads",
  });
  console.log(`opened ${session.id} (${session.opened.agent.name} ${session.opened.agent.version}), provider pid ${session.opened.process.pid}`);
  const turn = session.prompt({ requestId: "turn-1", prompt: job.prompt, timeoutMs: 120_000 });
  for await (const u of turn.updates) {
    summary.updates++;
    const kind = u.update.sessionUpdate;
    const text = kind === "agent_message_chunk" ? ` ${JSON.stringify(textOf(u) ?? "")}` : "";
    console.log(`  update #${u.seq} ${kind}${text}`);
  }
  summary.turn = await turn.result;
  console.log(`turn: ${summary.turn.status} (${summary.turn.stopReason ?? "-"})`);
  const { state, lastRequestId } = await session.status();
  summary.status = { state, lastRequestId };
  console.log(`status: ${state}, last request ${lastRequestId}`);
  summary.proof = await session.close({ reason: "node host done" });
  console.log(`close: proof complete=${summary.proof.complete} via ${summary.proof.verified.method}`);
} finally {
  // Always: a running sidecar keeps this process alive (its pipes are open).
  summary.shutdownProofs = await sidecar.shutdown();
  summary.sidecarPid = sidecar.pid;
  summary.exitCode = sidecar.exitCode;
}
console.log(JSON.stringify(summary));
process.exitCode = summary.turn?.status === "completed" && summary.proof?.complete && summary.exitCode === 0 ? 0 : 1;
