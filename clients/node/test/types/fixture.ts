// What a strict TypeScript host writes against @acpx-sidecar/client; it
// must compile (test/types.test.mjs runs tsc on it). Never run.
import {
  spawnSidecar,
  textOf,
  SidecarError,
  type EventsResult,
  type JournalEntry,
  type SidecarDataCode,
  type StatsResult,
  type AcpxRuntimeTurnInput,
  type SessionUpdateParams,
  type LifecycleNotice,
  type Publication,
} from "@acpx-sidecar/client";

export async function host(stateDir: string): Promise<void> {
  const sc = await spawnSidecar({ stateDir });
  const s = await sc.open({ sessionKey: "k", agent: "generic", command: { path: "/bin/true" }, cwd: "/tmp" });
  const turn = s.prompt({ requestId: "t1", prompt: "hi" });
  let text = "";
  for await (const u of turn.updates) {
    // The example host's pattern, typed: textOf takes the params or their update.
    const t: string | undefined = textOf(u);
    text += t ?? textOf(u.update) ?? "";
  }
  try {
    await turn.result;
  } catch (err) {
    if (err instanceof SidecarError) {
      const code: SidecarDataCode = err.dataCode;
      const asString: string = err.dataCode; // string-compatible
      if (err.dataCode === "TURN_ACTIVE" || err.dataCode === "TRANSPORT") console.log(code, asString);
      // @ts-expect-error a code outside the schema's DataCode union is a typo
      if (err.dataCode === "TURN_ACTIV") console.log("never");
      // data is the schema's ErrorData: its members keep their unions.
      const held: "this-sidecar" | "another-sidecar" | undefined = err.data?.heldBy;
      // @ts-expect-error heldBy is a union, not any string
      if (err.data?.heldBy === "nobody") console.log(held);
    }
  }
  // Batches: arrays of the same params, seq order.
  const bulk = s.prompt({ requestId: "t2", prompt: "hi" });
  for await (const batch of bulk.updateBatches()) {
    const all: SessionUpdateParams[] = batch;
    console.log(all.length, all[0]?.seq, textOf(all[0]!));
  }
  const page: EventsResult = await sc.events({ sessionKey: "k", afterSeq: 0, limit: 10 });
  const first: JournalEntry | undefined = page.events[0];
  for await (const p of sc.eventPages({ sessionKey: "k" })) console.log(p.nextSeq, p.truncated, first?.method);
  const st: StatsResult = await sc.stats();
  const queued: AcpxRuntimeTurnInput = { text: "x", requestId: "q", queue: true };
  console.log(text, st.turns.completed, queued);
  // Per-turn sessions (docs/protocol.md §24): open params, the lifecycle
  // event, the wait for a state and the proof's publication.
  const pt = await sc.open({
    sessionKey: "pt",
    agent: "generic",
    command: { path: "/bin/true" },
    cwd: "/tmp",
    lifecycle: "per-turn",
    reviveWaitMs: 5000,
    stateDirs: { agent: "/tmp/agent" },
  });
  sc.on("lifecycle", (n: LifecycleNotice) => console.log(n.state, n.proof?.origin, n.error?.code));
  const parked: LifecycleNotice = await pt.waitLifecycle("parked", { signal: AbortSignal.timeout(1000) });
  // @ts-expect-error "retiring" is a status state, never a notice's
  await pt.waitLifecycle("retiring");
  const pub: Publication | undefined = parked.proof?.publication;
  const mode: "warm" | "per-turn" = pt.opened.lifecycle;
  console.log(pub?.state, mode, pt.lifecycle?.state, (await pt.status()).lifecycle?.revives, st.liveTrees?.live);
  await sc.open({ sessionKey: "w", agent: "generic", command: { path: "/bin/true" }, cwd: "/tmp", lifecycle: { mode: "warm", idleRetireMs: 600000 } });
  const [a, b] = await Promise.all([sc.shutdown(), sc.shutdown()]);
  console.log(a.length === b.length);
}
