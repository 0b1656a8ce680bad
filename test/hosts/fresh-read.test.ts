// A node's value read once for a short time (SshHost.bootId): shared while in flight and fresh, read again
// after, and a failed read is not kept.
import { describe, expect, it } from "vitest";
import { FreshRead } from "../../src/hosts/fresh-read.js";

describe("FreshRead", () => {
  it("shares a read in flight and within freshMs of its start, and reads again after", async () => {
    let clock = 1_000;
    let reads = 0;
    const fresh = new FreshRead(
      async () => `boot-${++reads}`,
      2_000,
      () => clock,
    );
    const [a, b] = await Promise.all([fresh.get(), fresh.get()]);
    expect([a, b, reads]).toEqual(["boot-1", "boot-1", 1]);
    clock += 1_999;
    expect(await fresh.get()).toBe("boot-1");
    clock += 1;
    expect(await fresh.get()).toBe("boot-2");
    expect(reads).toBe(2);
  });

  it("keeps no failed read: the next caller reads again", async () => {
    let fail = true;
    const fresh = new FreshRead(
      async () => {
        if (fail) throw new Error("node unreachable");
        return "boot";
      },
      2_000,
      () => 0,
    );
    await expect(fresh.get()).rejects.toThrow("node unreachable");
    fail = false;
    expect(await fresh.get()).toBe("boot");
  });
});
