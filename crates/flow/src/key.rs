//! What the flow table finds a connection by: its two endpoints.

use tcpwhy_wire::Addr;

/// An address and a port.
pub(crate) type Endpoint = (Addr, u16);

/// A connection's two endpoints, as the table (`crate::table`) and the
/// attempts (`crate::attempts`) key them.
pub(crate) type Key = (Endpoint, Endpoint);
