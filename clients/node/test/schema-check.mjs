// frameChecker validates every frame of a connection against
// docs/protocol.schema.json (the envelope against Message; params and
// results against x-methods, a response paired with its request's method;
// a sidecar error against ErrorObject). Pass its onFrame to spawnSidecar
// and assert `errors` is empty at the end.
import { readFileSync } from "node:fs";
import Ajv2020 from "ajv/dist/2020.js";

const schema = JSON.parse(readFileSync(new URL("../../../docs/protocol.schema.json", import.meta.url), "utf8"));
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema(schema);
const validators = new Map();
function validator(name) {
  if (!validators.has(name)) validators.set(name, ajv.getSchema(`${schema.$id}#/$defs/${name}`));
  return validators.get(name);
}
const defName = (ref) => /^#\/\$defs\/(\w+)$/.exec(ref.$ref)[1];

export function frameChecker() {
  const pending = { sent: new Map(), received: new Map() }; // request id -> method, by who sent the request
  const errors = [];
  let frames = 0;
  const check = (name, value, what) => {
    const v = validator(name);
    if (!v(value)) errors.push(`${what} is not a valid ${name}: ${ajv.errorsText(v.errors)}: ${JSON.stringify(value).slice(0, 300)}`);
  };
  function onFrame(direction, msg) {
    frames++;
    check("Message", msg, `${direction} frame`);
    if (typeof msg.method === "string") {
      const m = schema["x-methods"][msg.method];
      const from = direction === "sent" ? "host" : "sidecar";
      if (!m) return errors.push(`${direction} unknown method ${msg.method}`);
      if (m.direction !== from && m.direction !== "both") errors.push(`${msg.method} sent by the ${from}, schema says ${m.direction}`);
      if ((msg.id !== undefined) !== (m.kind === "request")) errors.push(`${msg.method} as ${msg.id === undefined ? "notification" : "request"}, schema says ${m.kind}`);
      if (m.params) check(defName(m.params), msg.params ?? {}, `${msg.method} params`);
      if (msg.id !== undefined) pending[direction].set(msg.id, msg.method);
      return;
    }
    // A response answers a request that went the other way.
    const requests = direction === "sent" ? pending.received : pending.sent;
    const method = requests.get(msg.id);
    if (method === undefined) return errors.push(`${direction} response to unknown id ${msg.id}`);
    requests.delete(msg.id);
    if (msg.error !== undefined) {
      if (direction === "received") check("ErrorObject", msg.error, `${method} error`);
      return;
    }
    const m = schema["x-methods"][method];
    if (m.result) check(defName(m.result), msg.result, `${method} result`);
  }
  return { onFrame, errors, get frames() { return frames; } };
}
