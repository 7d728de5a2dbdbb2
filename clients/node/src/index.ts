/**
 * @acpx-sidecar/client: a Node host's client for acpx-sidecar
 * (docs/protocol.md). Start with {@link spawnSidecar}.
 */
export { Sidecar } from "./sidecar.js";
export { spawnSidecar } from "./spawn.js";
export { toSidecarError } from "./errors.js";
export type { PermissionHandler, ExitStatus, SidecarEvents, HandlerError } from "./sidecar.js";
export type { SpawnOptions } from "./spawn.js";
export { Session } from "./session.js";
export type { Turn, PromptOptions } from "./session.js";
export type { ExtRequest, ExtNotice, ExtRequestHandler, ExtSpawnOptions, AgentSessionsPage } from "./ext.js";
export { SidecarError, LocalDataCode } from "./errors.js";
export type { SidecarDataCode, SidecarErrorData } from "./errors.js";
export { textOf, CHUNK_KINDS } from "./updates.js";
export { resolveBinary, BINARY_ENV, PLATFORM_PACKAGES } from "./binary.js";
export { selected, cancelled, selectKind } from "./permission.js";
export { accept, decline, cancelElicitation } from "./elicitation.js";
export type { ElicitationHandler, ElicitationRequest, ElicitationResponse } from "./elicitation.js";
export { openAcpxRuntimePort } from "./runtime-port.js";
export type * from "./runtime-port.js";
export type * from "./types.js";
