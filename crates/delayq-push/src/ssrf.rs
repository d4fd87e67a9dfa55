//! Server-side request forgery protection: a push target's resolved addresses are checked
//! before any connection, and loopback, private, link-local, cloud metadata and other
//! non-public addresses are refused unless the operator allows private targets
//! (`serve --allow-private-targets`). Checked per resolved address, at connect time, so a name
//! that resolves to a private address (or starts to, DNS rebinding) is refused too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address may not be a push target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// 127.0.0.0/8, ::1.
    #[error("a loopback address")]
    Loopback,
    /// 10/8, 172.16/12, 192.168/16, fc00::/7.
    #[error("a private address")]
    Private,
    /// 169.254/16, fe80::/10.
    #[error("a link-local address")]
    LinkLocal,
    /// 169.254.169.254, fd00:ec2::254 and friends: cloud instance metadata.
    #[error("a cloud metadata address")]
    Metadata,
    /// 100.64/10 (carrier-grade NAT, shared address space).
    #[error("a shared (carrier-grade NAT) address")]
    Shared,
    /// 0.0.0.0/8, ::, multicast, broadcast, reserved and documentation ranges.
    #[error("not a public unicast address")]
    NotPublic,
}

/// Checks one resolved address of a push target; `allow_private` lets everything through.
pub fn check(addr: IpAddr, allow_private: bool) -> Result<(), Refused> {
    if allow_private {
        return Ok(());
    }
    match addr {
        IpAddr::V4(a) => check_v4(a),
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            // ::ffff:a.b.c.d reaches a.b.c.d.
            Some(v4) => check_v4(v4),
            None => check_v6(a),
        },
    }
}

fn check_v4(a: Ipv4Addr) -> Result<(), Refused> {
    let [x, y, ..] = a.octets();
    if a == Ipv4Addr::new(169, 254, 169, 254) || a == Ipv4Addr::new(169, 254, 170, 2) {
        return Err(Refused::Metadata);
    }
    if a.is_loopback() {
        Err(Refused::Loopback)
    } else if a.is_private() {
        Err(Refused::Private)
    } else if a.is_link_local() {
        Err(Refused::LinkLocal)
    } else if x == 100 && (64..128).contains(&y) {
        Err(Refused::Shared)
    } else if x == 0
        || x >= 224
        || a.is_broadcast()
        || a.is_documentation()
        || (x == 192 && y == 0 && a.octets()[2] == 0)
        || (x == 198 && (18..20).contains(&y))
    {
        Err(Refused::NotPublic)
    } else {
        Ok(())
    }
}

fn check_v6(a: Ipv6Addr) -> Result<(), Refused> {
    let s = a.segments();
    if s == [0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254] {
        return Err(Refused::Metadata);
    }
    if a.is_loopback() {
        Err(Refused::Loopback)
    } else if s[0] & 0xfe00 == 0xfc00 {
        Err(Refused::Private)
    } else if s[0] & 0xffc0 == 0xfe80 {
        Err(Refused::LinkLocal)
    } else if a.is_unspecified()
        || a.is_multicast()
        || s[0] == 0x2001 && s[1] == 0x0db8
        || s[0] == 0x0064 && s[1] == 0xff9b
        || a.to_ipv4().is_some()
    {
        // Documentation, NAT64 (reaches IPv4 of any kind) and IPv4-compatible forms.
        Err(Refused::NotPublic)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn non_public_addresses_are_refused() {
        let cases = [
            ("127.0.0.1", Refused::Loopback),
            ("127.9.9.9", Refused::Loopback),
            ("::1", Refused::Loopback),
            ("10.1.2.3", Refused::Private),
            ("172.16.0.1", Refused::Private),
            ("172.31.255.255", Refused::Private),
            ("192.168.1.1", Refused::Private),
            ("fd12:3456::1", Refused::Private),
            ("169.254.1.1", Refused::LinkLocal),
            ("fe80::1", Refused::LinkLocal),
            ("169.254.169.254", Refused::Metadata),
            ("fd00:ec2::254", Refused::Metadata),
            ("100.64.0.1", Refused::Shared),
            ("0.0.0.0", Refused::NotPublic),
            ("255.255.255.255", Refused::NotPublic),
            ("224.0.0.1", Refused::NotPublic),
            ("192.0.2.10", Refused::NotPublic),
            ("::", Refused::NotPublic),
            ("ff02::1", Refused::NotPublic),
            ("2001:db8::1", Refused::NotPublic),
            ("64:ff9b::a00:1", Refused::NotPublic),
            ("::ffff:127.0.0.1", Refused::Loopback),
            ("::ffff:169.254.169.254", Refused::Metadata),
            ("::ffff:10.0.0.1", Refused::Private),
        ];
        for (addr, why) in cases {
            assert_eq!(check(ip(addr), false), Err(why), "{addr}");
            assert_eq!(
                check(ip(addr), true),
                Ok(()),
                "{addr} with private targets allowed"
            );
        }
    }

    #[test]
    fn public_addresses_pass() {
        for addr in [
            "1.1.1.1",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "203.0.114.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(check(ip(addr), false), Ok(()), "{addr}");
        }
    }
}
