// The rig's names and subnets, without creating anything (the rig itself is proved in test/e2e/rig.test.ts).
import { describe, expect, test } from "vitest";
import { NAMED_SUBNETS, NETNS_PREFIX, parseSubnet, rigNames } from "./net.js";

describe("rig names", () => {
  test("interface names fit the kernel's 15 characters even for the largest pid and 26 hosts", () => {
    const n = rigNames(4_194_304);
    for (const name of [n.bridge, n.veth(0), n.veth(25)]) expect(name.length).toBeLessThanOrEqual(15);
  });

  test("namespaces and the rig dir carry the creating pid, which the sweep reads back", () => {
    const n = rigNames(31337, "abcde");
    expect(n.netns(1)).toBe(`${NETNS_PREFIX}31337-abcde-b`);
    expect(Number(n.netns(0).split("-")[1])).toBe(31337);
    expect(n.dir.endsWith("/31337-abcde")).toBe(true);
  });
});

describe("rig subnets", () => {
  test("a.b.c.0/24 gives its first three octets; the example rig's is 10.77.0", () => {
    expect(parseSubnet("10.77.0.0/24")).toBe("10.77.0");
    expect(parseSubnet(NAMED_SUBNETS["example"]!)).toBe("10.77.0");
  });

  test.each(["10.77.0.1/24", "10.77.0.0/16", "10.300.0.0/24", "10.77.0", ""])("%j is refused", (cidr) => {
    expect(() => parseSubnet(cidr)).toThrow(/is not an a\.b\.c\.0\/24/);
  });
});
