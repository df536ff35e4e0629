//! What can be wrong with bytes from a peer ([`ParseError`]), and the
//! OpenFlow ERROR each wrong thing is answered with ([`OfpError`]: every
//! type and code of the 1.3 spec, by name).

/// An OpenFlow error: `ofp_error_msg`'s type and code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OfpError {
    pub ty: u16,
    pub code: u16,
}

/// Every error type of OpenFlow 1.3 with its codes, in order (each
/// type's codes are numbered from 0).
pub const ERROR_TYPES: &[(u16, &str, &[&str])] = &[
    (0, "HELLO_FAILED", &["INCOMPATIBLE", "EPERM"]),
    (
        1,
        "BAD_REQUEST",
        &[
            "BAD_VERSION",
            "BAD_TYPE",
            "BAD_MULTIPART",
            "BAD_EXPERIMENTER",
            "BAD_EXP_TYPE",
            "EPERM",
            "BAD_LEN",
            "BUFFER_EMPTY",
            "BUFFER_UNKNOWN",
            "BAD_TABLE_ID",
            "IS_SLAVE",
            "BAD_PORT",
            "BAD_PACKET",
            "MULTIPART_BUFFER_OVERFLOW",
        ],
    ),
    (
        2,
        "BAD_ACTION",
        &[
            "BAD_TYPE",
            "BAD_LEN",
            "BAD_EXPERIMENTER",
            "BAD_EXP_TYPE",
            "BAD_OUT_PORT",
            "BAD_ARGUMENT",
            "EPERM",
            "TOO_MANY",
            "BAD_QUEUE",
            "BAD_OUT_GROUP",
            "MATCH_INCONSISTENT",
            "UNSUPPORTED_ORDER",
            "BAD_TAG",
            "BAD_SET_TYPE",
            "BAD_SET_LEN",
            "BAD_SET_ARGUMENT",
        ],
    ),
    (
        3,
        "BAD_INSTRUCTION",
        &[
            "UNKNOWN_INST",
            "UNSUP_INST",
            "BAD_TABLE_ID",
            "UNSUP_METADATA",
            "UNSUP_METADATA_MASK",
            "BAD_EXPERIMENTER",
            "BAD_EXP_TYPE",
            "BAD_LEN",
            "EPERM",
        ],
    ),
    (
        4,
        "BAD_MATCH",
        &[
            "BAD_TYPE",
            "BAD_LEN",
            "BAD_TAG",
            "BAD_DL_ADDR_MASK",
            "BAD_NW_ADDR_MASK",
            "BAD_WILDCARDS",
            "BAD_FIELD",
            "BAD_VALUE",
            "BAD_MASK",
            "BAD_PREREQ",
            "DUP_FIELD",
            "EPERM",
        ],
    ),
    (
        5,
        "FLOW_MOD_FAILED",
        &[
            "UNKNOWN",
            "TABLE_FULL",
            "BAD_TABLE_ID",
            "OVERLAP",
            "EPERM",
            "BAD_TIMEOUT",
            "BAD_COMMAND",
            "BAD_FLAGS",
        ],
    ),
    (
        6,
        "GROUP_MOD_FAILED",
        &[
            "GROUP_EXISTS",
            "INVALID_GROUP",
            "WEIGHT_UNSUPPORTED",
            "OUT_OF_GROUPS",
            "OUT_OF_BUCKETS",
            "CHAINING_UNSUPPORTED",
            "WATCH_UNSUPPORTED",
            "LOOP",
            "UNKNOWN_GROUP",
            "CHAINED_GROUP",
            "BAD_TYPE",
            "BAD_COMMAND",
            "BAD_BUCKET",
            "BAD_WATCH",
            "EPERM",
        ],
    ),
    (
        7,
        "PORT_MOD_FAILED",
        &[
            "BAD_PORT",
            "BAD_HW_ADDR",
            "BAD_CONFIG",
            "BAD_ADVERTISE",
            "EPERM",
        ],
    ),
    (8, "TABLE_MOD_FAILED", &["BAD_TABLE", "BAD_CONFIG", "EPERM"]),
    (9, "QUEUE_OP_FAILED", &["BAD_PORT", "BAD_QUEUE", "EPERM"]),
    (
        10,
        "SWITCH_CONFIG_FAILED",
        &["BAD_FLAGS", "BAD_LEN", "EPERM"],
    ),
    (11, "ROLE_REQUEST_FAILED", &["STALE", "UNSUP", "BAD_ROLE"]),
    (
        12,
        "METER_MOD_FAILED",
        &[
            "UNKNOWN",
            "METER_EXISTS",
            "INVALID_METER",
            "UNKNOWN_METER",
            "BAD_COMMAND",
            "BAD_FLAGS",
            "BAD_RATE",
            "BAD_BURST",
            "BAD_BAND",
            "BAD_BAND_VALUE",
            "OUT_OF_METERS",
            "OUT_OF_BANDS",
        ],
    ),
    (
        13,
        "TABLE_FEATURES_FAILED",
        &[
            "BAD_TABLE",
            "BAD_METADATA",
            "BAD_TYPE",
            "BAD_LEN",
            "BAD_ARGUMENT",
            "EPERM",
        ],
    ),
];

/// `OFPET_EXPERIMENTER`: the code is the experimenter's type.
pub const EXPERIMENTER_ERROR: u16 = 0xffff;

impl OfpError {
    pub const fn new(ty: u16, code: u16) -> OfpError {
        OfpError { ty, code }
    }

    pub const HELLO_INCOMPATIBLE: OfpError = OfpError::new(0, 0);
    pub const HELLO_EPERM: OfpError = OfpError::new(0, 1);
    pub const BAD_VERSION: OfpError = OfpError::new(1, 0);
    pub const BAD_TYPE: OfpError = OfpError::new(1, 1);
    pub const BAD_MULTIPART: OfpError = OfpError::new(1, 2);
    pub const BAD_EXPERIMENTER: OfpError = OfpError::new(1, 3);
    pub const BAD_EXP_TYPE: OfpError = OfpError::new(1, 4);
    pub const REQUEST_EPERM: OfpError = OfpError::new(1, 5);
    pub const BAD_LEN: OfpError = OfpError::new(1, 6);
    pub const BUFFER_UNKNOWN: OfpError = OfpError::new(1, 8);
    pub const BAD_TABLE_ID: OfpError = OfpError::new(1, 9);
    pub const IS_SLAVE: OfpError = OfpError::new(1, 10);
    pub const BAD_PORT: OfpError = OfpError::new(1, 11);
    pub const BAD_PACKET: OfpError = OfpError::new(1, 12);
    pub const MULTIPART_BUFFER_OVERFLOW: OfpError = OfpError::new(1, 13);
    pub const SWITCH_CONFIG_BAD_FLAGS: OfpError = OfpError::new(10, 0);
    pub const SWITCH_CONFIG_BAD_LEN: OfpError = OfpError::new(10, 1);
    pub const ROLE_STALE: OfpError = OfpError::new(11, 0);
    pub const ROLE_UNSUP: OfpError = OfpError::new(11, 1);
    pub const ROLE_BAD_ROLE: OfpError = OfpError::new(11, 2);

    /// `OFPET_BAD_REQUEST/OFPBRC_BAD_TYPE`-style name; unknown numbers in
    /// decimal.
    pub fn name(self) -> String {
        if self.ty == EXPERIMENTER_ERROR {
            return format!("EXPERIMENTER(type {})", self.code);
        }
        match ERROR_TYPES.iter().find(|(t, _, _)| *t == self.ty) {
            Some((_, ty, codes)) => match codes.get(usize::from(self.code)) {
                Some(code) => format!("{ty}/{code}"),
                None => format!("{ty}/code {}", self.code),
            },
            None => format!("type {}/code {}", self.ty, self.code),
        }
    }

    /// Whether the spec defines this type and code.
    pub fn is_defined(self) -> bool {
        self.ty == EXPERIMENTER_ERROR
            || ERROR_TYPES
                .iter()
                .any(|(t, _, c)| *t == self.ty && usize::from(self.code) < c.len())
    }
}

impl std::fmt::Display for OfpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// Why bytes from a peer are not a message this codec accepts. Each maps
/// to the ERROR the spec answers it with ([`ParseError::ofp_error`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("message truncated in {what}: {need} bytes needed, {have} left")]
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    #[error("header length {length} is shorter than the 8-byte header")]
    ShortLength { length: u16 },
    #[error("header length {length} is over this connection's limit of {limit} bytes")]
    OverLimit { length: u16, limit: usize },
    #[error("header length {length} but {have} bytes in the message")]
    LengthMismatch { length: u16, have: usize },
    #[error("{what}: length {length} is not valid here")]
    BadLength { what: &'static str, length: usize },
    #[error("version {0:#04x}: this switch speaks OpenFlow 1.3 (0x04)")]
    BadVersion(u8),
    #[error("message type {0} is not an OpenFlow 1.3 message")]
    BadType(u8),
    #[error("multipart type {0} is not one this switch answers")]
    BadMultipart(u16),
    #[error("experimenter {0:#010x} is not one this switch knows")]
    BadExperimenter(u32),
    #[error("{what}: {detail}")]
    Invalid {
        what: &'static str,
        detail: String,
        error: OfpError,
    },
}

impl ParseError {
    /// The ERROR the spec answers this with.
    pub fn ofp_error(&self) -> OfpError {
        match self {
            ParseError::Truncated { .. }
            | ParseError::ShortLength { .. }
            | ParseError::OverLimit { .. }
            | ParseError::LengthMismatch { .. }
            | ParseError::BadLength { .. } => OfpError::BAD_LEN,
            ParseError::BadVersion(_) => OfpError::BAD_VERSION,
            ParseError::BadType(_) => OfpError::BAD_TYPE,
            ParseError::BadMultipart(_) => OfpError::BAD_MULTIPART,
            ParseError::BadExperimenter(_) => OfpError::BAD_EXPERIMENTER,
            ParseError::Invalid { error, .. } => *error,
        }
    }
}
