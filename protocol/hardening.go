package protocol

// The defences against a hostile agent (docs/protocol.md §20, "Threat
// model"): audit decisions and bounds.
const (
	// DecisionMalformed is session/permission `decision` of an ACP
	// session/request_permission the sidecar refused to judge: a member
	// name occurs twice, differs from one the policy reads only by case,
	// has the wrong type, or two options share an optionId. The agent is
	// answered cancelled.
	DecisionMalformed Decision = "malformed"
	// DecisionOverflow is session/permission `decision` of an escalation
	// decided as nonInteractivePermissions says because the turn already
	// had --max-pending-asks asks waiting for the host, or their params
	// would pass --max-pending-ask-bytes.
	DecisionOverflow Decision = "overflow"

	// DefaultMaxPendingAsks bounds the permission asks of one turn waiting
	// for the host (--max-pending-asks).
	DefaultMaxPendingAsks = 64
	// DefaultMaxPendingAskBytes bounds the bytes of ACP params of the asks
	// of one turn waiting for the host (--max-pending-ask-bytes): 16 MiB.
	DefaultMaxPendingAskBytes = 16 << 20
	// DefaultStateReadMs bounds how long session/status waits for a busy
	// session actor before it is answered from the session's last
	// snapshot (StatusResult.FromSnapshot).
	DefaultStateReadMs = 1000
	// DefaultMaxProviderLineBytes bounds one line read from a provider's
	// stdout (--max-provider-line-bytes): 256 MiB. A longer line is
	// dropped as it is read; the connection survives.
	DefaultMaxProviderLineBytes = 256 << 20
)
