"""The authorizer (gateway/security): Kafka's ACL semantics — deny wins, implied operations, the wildcard principal,
hosts, literal `*` and prefixed patterns, super users, the answer when no ACL applies — over a real security store,
its bindings read again after a change; ACL filters; and the mapping of certificate subjects to principals
(Kafka's ssl.principal.mapping.rules)."""

from __future__ import annotations

import pytest

from logway.gateway.security import Acl, AclFilter, Authorizer, Operation as Op, PatternType as Pat
from logway.gateway.security import Permission as Perm, ResourceType as R
from logway.gateway.security.acls import AclInvalid, parse_name
from logway.gateway.security.principals import NoMatchingRule, PrincipalMapper, subject_name
from logway.storage.security import SecurityStore

ALICE, BOB = "User:alice", "User:bob"
HOST, OTHER_HOST = "10.0.0.1", "10.0.0.2"


def acl(rtype, name, op, perm=Perm.ALLOW, principal=ALICE, host="*", pattern=Pat.LITERAL) -> Acl:
    return Acl(rtype, name, pattern, principal, host, op, perm)


@pytest.fixture
def store(tmp_path):
    s = SecurityStore(tmp_path)
    yield s
    s.close()


def authorizer(store, *acls, super_users=(), allow_if_no_acl=False) -> Authorizer:
    a = Authorizer(store, super_users, allow_if_no_acl)
    if acls:
        a.change(acls, [])
    return a


def test_an_allow_acl_allows_that_principal_that_operation_on_that_resource(store):
    a = authorizer(store, acl(R.TOPIC, "orders", Op.READ))
    assert a.allowed(ALICE, HOST, Op.READ, R.TOPIC, "orders")
    assert not a.allowed(BOB, HOST, Op.READ, R.TOPIC, "orders")
    assert not a.allowed(ALICE, HOST, Op.WRITE, R.TOPIC, "orders")
    assert not a.allowed(ALICE, HOST, Op.READ, R.TOPIC, "orders2")
    assert not a.allowed(ALICE, HOST, Op.READ, R.GROUP, "orders")


def test_deny_wins_over_allow(store):
    a = authorizer(store, acl(R.TOPIC, "*", Op.ALL), acl(R.TOPIC, "secret", Op.READ, Perm.DENY))
    assert a.allowed(ALICE, HOST, Op.WRITE, R.TOPIC, "secret")
    assert not a.allowed(ALICE, HOST, Op.READ, R.TOPIC, "secret")
    assert a.allowed(ALICE, HOST, Op.READ, R.TOPIC, "public")


def test_read_write_delete_alter_imply_describe_and_alter_configs_implies_describe_configs(store):
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        a = authorizer(store, acl(R.TOPIC, f"t-{op.name}", op))
        assert a.allowed(ALICE, HOST, Op.DESCRIBE, R.TOPIC, f"t-{op.name}")
    a = authorizer(store, acl(R.TOPIC, "c", Op.ALTER_CONFIGS))
    assert a.allowed(ALICE, HOST, Op.DESCRIBE_CONFIGS, R.TOPIC, "c")
    assert not a.allowed(ALICE, HOST, Op.DESCRIBE, R.TOPIC, "c")
    a = authorizer(store, acl(R.TOPIC, "x", Op.CREATE))
    assert not a.allowed(ALICE, HOST, Op.DESCRIBE, R.TOPIC, "x")  # Create does not imply Describe


def test_a_deny_denies_only_what_it_names(store):
    # A Deny of Read does not deny Describe (implication is for Allow only); a Deny of All denies everything.
    a = authorizer(store, acl(R.TOPIC, "t", Op.ALL), acl(R.TOPIC, "t", Op.READ, Perm.DENY))
    assert a.allowed(ALICE, HOST, Op.DESCRIBE, R.TOPIC, "t")
    a = authorizer(store, acl(R.TOPIC, "u", Op.ALL, Perm.DENY), acl(R.TOPIC, "u", Op.DESCRIBE))
    assert not a.allowed(ALICE, HOST, Op.DESCRIBE, R.TOPIC, "u")


def test_the_wildcard_principal_and_hosts(store):
    a = authorizer(store, acl(R.TOPIC, "t", Op.READ, principal="User:*", host=HOST))
    assert a.allowed(BOB, HOST, Op.READ, R.TOPIC, "t")
    assert a.allowed("User:ANONYMOUS", HOST, Op.READ, R.TOPIC, "t")
    assert not a.allowed(BOB, OTHER_HOST, Op.READ, R.TOPIC, "t")


def test_prefixed_and_literal_wildcard_patterns(store):
    a = authorizer(store, acl(R.TOPIC, "logs-", Op.READ, pattern=Pat.PREFIXED),
                   acl(R.TOPIC, "logs-secret", Op.READ, Perm.DENY, pattern=Pat.PREFIXED),
                   acl(R.GROUP, "*", Op.READ))
    assert a.allowed(ALICE, HOST, Op.READ, R.TOPIC, "logs-")
    assert a.allowed(ALICE, HOST, Op.READ, R.TOPIC, "logs-app")
    assert not a.allowed(ALICE, HOST, Op.READ, R.TOPIC, "logs-secret-2")
    assert not a.allowed(ALICE, HOST, Op.READ, R.TOPIC, "logs")  # shorter than the prefix
    assert not a.allowed(ALICE, HOST, Op.READ, R.TOPIC, "app-logs-")
    assert a.allowed(ALICE, HOST, Op.READ, R.GROUP, "any-group")  # LITERAL "*": every group
    # a LITERAL binding named "*" is not a prefix: a topic whose name starts with "*" is not covered by it alone
    b = authorizer(store, acl(R.TOPIC, "*x", Op.READ))
    assert not b.allowed(ALICE, HOST, Op.READ, R.TOPIC, "*xy")


def test_super_users_and_the_answer_when_no_acl_applies(store):
    a = authorizer(store, acl(R.TOPIC, "guarded", Op.READ, principal=BOB), super_users={"User:root"})
    assert a.allowed("User:root", HOST, Op.DELETE, R.CLUSTER, "kafka-cluster")
    assert not a.allowed(ALICE, HOST, Op.READ, R.TOPIC, "open")  # no ACL: nobody's (authentication on)
    open_ = authorizer(store, allow_if_no_acl=True)
    assert open_.allowed(ALICE, HOST, Op.READ, R.TOPIC, "open")  # no ACL applies: everyone's
    assert not open_.allowed(ALICE, HOST, Op.READ, R.TOPIC, "guarded")  # an ACL applies (to bob): not alice's


def test_a_change_is_durable_and_served_at_once(store, tmp_path):
    a = authorizer(store)
    assert not a.allowed(ALICE, HOST, Op.READ, R.TOPIC, "t")  # (remembered…)
    a.change([acl(R.TOPIC, "t", Op.READ)], [])
    assert a.allowed(ALICE, HOST, Op.READ, R.TOPIC, "t")  # (… and forgotten on change)
    a.change([], [acl(R.TOPIC, "t", Op.READ)])
    assert not a.allowed(ALICE, HOST, Op.READ, R.TOPIC, "t")
    a.change([acl(R.GROUP, "g", Op.READ)], [])
    store.close()
    reopened = SecurityStore(tmp_path)
    assert Authorizer(reopened, (), False).acls() == [acl(R.GROUP, "g", Op.READ)]
    reopened.close()


def test_some_topic_is_writable(store):
    assert not authorizer(store).any_allowed(ALICE, HOST, Op.WRITE, R.TOPIC)
    a = authorizer(store, acl(R.TOPIC, "t-", Op.WRITE, pattern=Pat.PREFIXED))
    assert a.any_allowed(ALICE, HOST, Op.WRITE, R.TOPIC) and not a.any_allowed(BOB, HOST, Op.WRITE, R.TOPIC)
    a.change([acl(R.TOPIC, "t", Op.WRITE, Perm.DENY, pattern=Pat.PREFIXED)], [])  # covers every "t-…" it allows
    assert not a.any_allowed(ALICE, HOST, Op.WRITE, R.TOPIC)
    a.change([acl(R.TOPIC, "x", Op.WRITE)], [])
    assert a.any_allowed(ALICE, HOST, Op.WRITE, R.TOPIC)


def test_filters_match_as_kafkas(store):
    lit, pre, star = (acl(R.TOPIC, "orders", Op.READ), acl(R.TOPIC, "ord", Op.WRITE, pattern=Pat.PREFIXED),
                      acl(R.TOPIC, "*", Op.DESCRIBE, principal=BOB))
    a = authorizer(store, lit, pre, star, acl(R.GROUP, "orders", Op.READ))
    assert set(a.acls(AclFilter(R.TOPIC))) == {lit, pre, star}
    assert set(a.acls(AclFilter(R.ANY, "orders", Pat.LITERAL))) == {lit, acl(R.GROUP, "orders", Op.READ)}
    assert set(a.acls(AclFilter(R.TOPIC, "orders", Pat.MATCH))) == {lit, pre, star}
    assert set(a.acls(AclFilter(R.TOPIC, "other", Pat.MATCH))) == {star}
    assert a.acls(AclFilter(principal=BOB)) == [star]
    assert a.acls(AclFilter(operation=Op.WRITE)) == [pre]


def test_bindings_that_cannot_be_created():
    for bad, why in [(acl(R.ANY, "t", Op.READ), "resource type"), (acl(R.TOPIC, "t", Op.READ, pattern=Pat.MATCH),
                                                                   "pattern type"),
                     (acl(R.GROUP, "g", Op.WRITE), "does not apply"), (acl(R.TOPIC, "t", Op.READ, Perm.ANY),
                                                                       "permission"),
                     (acl(R.TOPIC, "", Op.READ), "empty"), (acl(R.CLUSTER, "other", Op.ALTER), "kafka-cluster"),
                     (acl(R.TOPIC, "t", Op.READ, principal="alice"), "principal"),
                     (acl(R.TOPIC, "*", Op.READ, pattern=Pat.PREFIXED), "PREFIXED")]:
        with pytest.raises(AclInvalid, match=why):
            bad.validate()
    assert parse_name(R, "transactional-id") is R.TRANSACTIONAL_ID and parse_name(Op, "IdempotentWrite") \
        is Op.IDEMPOTENT_WRITE
    with pytest.raises(ValueError, match="unknown Operation"):
        parse_name(Op, "Fly")


# ----------------------------------------------------------------------------------------- principals

SUBJECT = ((("countryName", "US"),), (("organizationName", "Acme, Inc."),), (("organizationalUnitName", "eng"),),
           (("commonName", "alice"),))


def test_a_subject_is_written_as_java_writes_it():
    assert subject_name(SUBJECT) == r"CN=alice,OU=eng,O=Acme\, Inc.,C=US"
    assert subject_name(((("commonName", " lead"), ("userId", "7")),)) == r"CN=\ lead+UID=7"


@pytest.mark.parametrize("rules, subject, name", [
    ("DEFAULT", "CN=alice,OU=eng", "CN=alice,OU=eng"),
    ("RULE:^CN=(.*?),OU=(.*?)$/$1@$2/", "CN=alice,OU=eng", "alice@eng"),
    ("RULE:^CN=(.*?),OU=(.*?)$/$1@$2/U", "CN=alice,OU=eng", "ALICE@ENG"),
    ("RULE:^CN=([a-z]+).*$/$1/L, DEFAULT", "CN=Bob,O=x", "CN=Bob,O=x"),
    ("RULE:^CN=([A-Za-z]+).*$/$1/L, DEFAULT", "CN=Bob,O=x", "bob"),
    ("RULE:^OU=x$/never/,DEFAULT", "CN=carol", "CN=carol"),
    (r"RULE:^CN=(.*)$/svc\/$1/", "CN=a", "svc/a"),
])
def test_mapping_rules(rules, subject, name):
    assert PrincipalMapper(rules).name(subject) == name


def test_a_subject_no_rule_maps_is_refused_and_bad_rules_do_not_parse():
    with pytest.raises(NoMatchingRule):
        PrincipalMapper("RULE:^CN=admin$/admin/").name("CN=alice")
    for bad in ("RULE:^CN=(.*/$1/", "RULE:x", "SOMETHING"):
        with pytest.raises(ValueError):
            PrincipalMapper(bad)
