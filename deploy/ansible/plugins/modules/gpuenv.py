#!/usr/bin/python
# -*- coding: utf-8 -*-

# The module is Python, not a Go program: ansible-core reads DOCUMENTATION,
# EXAMPLES and RETURN from this file for ansible-doc, ships it to the host
# without a build on the controller, and Debian 12's ansible-core 2.14 runs
# it with the host's python3. All the work is gpuenv's own, through its JSON.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpuenv
short_description: Make a GPU host match a gpuenv spec, roll it back, or check it
version_added: "0.9.0"
description:
  - Runs the C(gpuenv) installed on the managed host (the C(install) role of
    this collection installs it) and reads only its JSON output, never its
    text.
  - I(state=present) plans the spec with C(gpuenv plan --json --out PLANFILE)
    and, when the plan has changes, applies exactly that plan with
    C(gpuenv apply --json --auto-approve PLANFILE), following its event
    stream. gpuenv journals every operation; a failing operation stops the
    apply and gpuenv reverts the operations already done before the module
    reports the failure.
  - In check mode, I(state=present) only plans. C(changed) says whether the
    plan has changes; nothing on the host is touched.
  - With C(--diff), the module returns each step's before and after values
    from the plan.
  - I(state=rolled_back) runs C(gpuenv rollback --json --auto-approve).
    Without I(to) it undoes the newest apply not yet undone (each run walks
    one apply further back, as C(gpuenv rollback) does); with I(to) it
    restores the host as it was right after generation I(to), and a second
    run finds nothing to roll back. In check mode the module asks gpuenv what
    the rollback would undo and declines it.
  - I(state=doctor) returns C(gpuenv doctor --json) as data and never
    changes the host; I(state=observed) returns C(gpuenv observe --json), the
    facts a fleet-wide C(gpuenv plan --facts) plans against.
  - A failure's C(msg) carries gpuenv's own diagnostics (the spec's errors
    with file and line, the failed operation and its error, whether the
    revert finished), and the complete JSON is in the result.
options:
  state:
    description:
      - C(present) makes the host match I(spec); C(rolled_back) rolls
        applies back; C(doctor) checks the host; C(observed) returns what
        gpuenv observes on it.
    type: str
    choices: [present, rolled_back, doctor, observed]
    default: present
  spec:
    description:
      - The spec on the managed host, a C(.hcl) file or a directory whose
        C(*.hcl) files form one spec. Used by I(state=present).
    type: path
    default: /etc/gpuenv
  root:
    description:
      - The host's root directory, C(--root); every host path is read and
        written under it. Other than C(/) only for tests and image builds.
    type: path
    default: /
  state_dir:
    description:
      - Where gpuenv keeps its generations, as a path inside I(root),
        C(--state-dir). gpuenv's default, C(/var/lib/gpuenv), when omitted.
    type: path
  variables:
    description:
      - Input variables of the spec, each passed as C(--var NAME=VALUE).
    type: dict
    default: {}
  var_files:
    description:
      - Files of input variable values on the managed host, C(--var-file).
    type: list
    elements: path
    default: []
  python:
    description:
      - Python interpreters (paths inside I(root)) whose environments gpuenv
        also observes and checks, C(--python).
    type: list
    elements: str
    default: []
  programs:
    description:
      - Native programs (paths inside I(root)) whose libraries
        I(state=doctor) follows through the dynamic loader, C(--program).
    type: list
    elements: str
    default: []
  revert:
    description:
      - Whether a failing apply reverts the operations already done. With
        C(false), C(--no-revert) leaves them in place for a later
        I(state=rolled_back).
    type: bool
    default: true
  allow_reboot:
    description:
      - Whether to apply a plan whose changes need a reboot to take effect
        (a kernel module, the initramfs). With C(false), such a plan fails
        the task before anything is applied, so that a rolling play stops
        at the first host that would need one. gpuenv never reboots a host;
        C(needs_reboot) in the result tells the play to.
    type: bool
    default: true
  to:
    description:
      - With I(state=rolled_back), restore the host as it was right after
        generation I(to) (C(0) is before the first apply), C(--to).
    type: int
  executable:
    description:
      - The gpuenv binary on the managed host; found on C(PATH) when
        omitted.
    type: path
notes:
  - Needs root on the managed host for I(state=present) and
    I(state=rolled_back), as gpuenv does (C(become=true)).
  - The host's gpuenv must speak plan format 1 and event stream format 1;
    the module refuses other major versions, naming them.
  - A check-mode rollback takes gpuenv's lock for a moment, as any rollback
    does, and declines before anything is run.
author:
  - gpuenv developers
"""

EXAMPLES = r"""
- name: Install gpuenv and the spec
  hosts: gpu
  become: true
  roles:
    - role: gpuenv.gpuenv.install
      vars:
        gpuenv_deb: dist/gpuenv_0.9.0_amd64.deb
        gpuenv_spec_src: specs/cluster/

- name: Roll the spec out, one host at a time, stopping at the first failure
  hosts: gpu
  become: true
  serial: 1
  max_fail_percentage: 0
  tasks:
    - name: Apply the spec
      gpuenv.gpuenv.gpuenv:
        spec: /etc/gpuenv
        allow_reboot: false
      register: gpuenv

    - name: Reboot where the change needs it
      ansible.builtin.reboot:
      when: gpuenv.needs_reboot

- name: Take the hosts back to the generation before the rollout
  hosts: gpu
  become: true
  tasks:
    - gpuenv.gpuenv.gpuenv:
        state: rolled_back
        to: 3

- name: Check the GPUs
  hosts: gpu
  tasks:
    - gpuenv.gpuenv.gpuenv:
        state: doctor
      register: doctor
    - ansible.builtin.debug:
        msg: "{{ doctor.doctor.checks | selectattr('status', 'eq', 'problem') | list }}"
      when: not doctor.healthy
"""

RETURN = r"""
plan:
  description:
    - The plan document of C(gpuenv plan --json) (I(state=present)), with
      C(format_version), C(summary), C(steps) in execution order with
      C(address), C(action), C(before), C(after) and C(reason), C(warnings),
      C(needs_reboot).
  returned: state is present and gpuenv could plan
  type: dict
rollback:
  description: What the rollback undoes, from gpuenv's C(rollback_plan) event (C(generations), C(undo)).
  returned: state is rolled_back and there was something to roll back
  type: dict
summary:
  description:
    - The C(summary) event that ends gpuenv's apply or rollback stream, with
      C(outcome), C(generation), C(done), C(reverted), C(needs_reboot),
      C(exit_code), and C(result) with the failed operation and its log's
      last lines.
  returned: when an apply or rollback ran
  type: dict
events:
  description:
    - The apply or rollback events in order (C(operation_start),
      C(operation_end), C(revert_start), C(revert_end), C(message),
      C(diagnostic) …), without the package managers' output lines and the
      progress events.
  returned: when an apply or rollback ran
  type: list
  elements: dict
package_manager_output:
  description: The lines the package managers printed during the apply or rollback.
  returned: when an apply or rollback ran
  type: list
  elements: str
generation:
  description: The generation the apply or rollback made; C(0) when none.
  returned: when an apply or rollback ran
  type: int
needs_reboot:
  description: Whether the host needs a reboot for the plan's (or the rollback's) changes to take effect.
  returned: state is present or rolled_back
  type: bool
diagnostics:
  description: gpuenv's diagnostics (C(severity), C(summary), C(detail), C(range)).
  returned: always
  type: list
  elements: dict
doctor:
  description: The document of C(gpuenv doctor --json).
  returned: state is doctor
  type: dict
healthy:
  description: Whether doctor found no problems (warnings alone are healthy).
  returned: state is doctor
  type: bool
observation:
  description: The document of C(gpuenv observe --json).
  returned: state is observed
  type: dict
rc:
  description:
    - The exit status of the last gpuenv command. Left out for
      I(state=doctor), whose exit status 2 (problems found) is a report
      that C(healthy) gives, and any non-zero C(rc) fails an Ansible task.
  returned: except for state=doctor
  type: int
"""

import json
import os
import subprocess

from ansible.module_utils.basic import AnsibleModule

# The major versions of gpuenv's formats this module reads.
# gpuenv's one JSON format version is 3.x; a gpuenv from before the
# documents shared one version wrote the plan and the stream as 1.x.
PLAN_FORMAT_MAJOR = ("3", "1")
STREAM_FORMAT_MAJOR = ("3", "1")

# Event types kept out of the result's events list: the package managers'
# lines have a list of their own, progress is for a live view, and the
# plan is the result's own plan.
QUIET_EVENTS = ("package_manager_output", "progress", "plan")


class GpuenvError(Exception):
    """A failure to report, with what goes into the result beside msg."""

    def __init__(self, msg, **result):
        Exception.__init__(self, msg)
        self.msg = msg
        self.result = result


class Gpuenv:
    def __init__(self, module):
        self.module = module
        p = module.params
        self.binary = p["executable"] or module.get_bin_path("gpuenv", required=True)
        self.globals = ["--root", p["root"]]
        if p["state_dir"]:
            self.globals += ["--state-dir", p["state_dir"]]

    def run(self, args):
        """Runs gpuenv with args; stdin is never a terminal, so gpuenv
        never waits for a person. The global options come before the
        command, so that args may end with "--" and the paths after it:
        a spec named "--var-file=/tmp/x" is a path, not an option."""
        argv = [self.binary] + self.globals + list(args)
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=dict(os.environ, NO_COLOR="1"))
        return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")

    def document(self, args, what):
        """Runs a command that prints one JSON document and decodes it."""
        rc, out, err = self.run(args)
        try:
            doc = json.loads(out)
        except ValueError:
            raise GpuenvError("%s printed no JSON document (exit %d): %s" % (what, rc, first_line(err or out)),
                              rc=rc, stdout=out, stderr=err)
        if not isinstance(doc, dict):
            raise GpuenvError("%s printed JSON that is not an object" % what, rc=rc, stdout=out, stderr=err)
        return rc, doc, err

    def stream(self, args, what):
        """Runs apply or rollback with --json and splits its JSON Lines."""
        rc, out, err = self.run(args)
        events = []
        for n, line in enumerate(out.splitlines(), 1):
            if not line.strip():
                continue
            try:
                events.append(json.loads(line))
            except ValueError:
                raise GpuenvError("%s: line %d of its event stream is not JSON: %s" % (what, n, line[:200]),
                                  rc=rc, stdout=out, stderr=err)
        if not events or events[0].get("type") != "version":
            raise GpuenvError("%s printed no event stream (exit %d): %s" % (what, rc, first_line(err or out)),
                              rc=rc, stdout=out, stderr=err)
        check_major(events[0].get("format_version"), STREAM_FORMAT_MAJOR, "%s's event stream" % what)
        return rc, events, err


def first_line(text):
    text = text.strip()
    return text.splitlines()[0] if text else "(no output)"


def check_major(version, majors, what):
    if not isinstance(version, str) or version.split(".")[0] not in majors:
        raise GpuenvError("%s has format version %r; this module reads version %s: install the collection that "
                          "matches the hosts' gpuenv" % (what, version, " and ".join(m + ".x" for m in majors)))


def describe_diagnostic(d):
    """One diagnostic as gpuenv's human view says it: where, what, why."""
    text = d.get("summary", "")
    r = d.get("range")
    if r and r.get("filename"):
        text = "%s:%d: %s" % (r["filename"], r.get("start", {}).get("line", 0), text)
    if d.get("detail"):
        text += ": " + d["detail"]
    return text


def errors_of(diags):
    return [describe_diagnostic(d) for d in diags if d.get("severity") == "error"]


def step_diff(step):
    """Ansible's before/after for one plan step: its attributes, one per line."""

    def lines(values):
        return "".join("%s = %s\n" % (k, values[k]) for k in sorted(values or {}))

    return {
        "before_header": step["address"],
        "after_header": "%s (%s)" % (step["address"], step.get("action")),
        "before": lines(step.get("before")),
        "after": lines(step.get("after")),
    }


def split_events(events):
    """The events worth listing, the package managers' lines, the
    diagnostics and the closing summary."""
    listed, output, diags, summary = [], [], [], None
    for ev in events:
        t = ev.get("type")
        if t == "package_manager_output":
            output.append(ev.get("line", ""))
        elif t == "diagnostic":
            diags.append(ev.get("diagnostic", {}))
        elif t == "summary":
            summary = ev
        if t not in QUIET_EVENTS:
            listed.append(ev)
    return listed, output, diags, summary


def log_tail(failure):
    # gpuenv chose how many of the log's last lines tell the failure.
    tail = failure.get("log_tail") or []
    return " (log: %s)" % " | ".join(tail) if tail else ""


def run_failure(kind, summary, diags):
    """The msg of an apply or rollback that did not succeed, from its
    summary and diagnostics."""
    parts = errors_of(diags)
    res = (summary or {}).get("result") or {}
    failed = res.get("failed")
    if failed:
        where = failed.get("step") or ""
        parts.append("%s failed at %s%s: %s%s" % (kind, where + ": " if where else "", failed.get("what", ""),
                                                  failed.get("error", ""), log_tail(failed)))
    revert_failed = res.get("revert_failed")
    if revert_failed:
        parts.append("%s stopped at the inverse %s: %s%s; the host needs attention: roll back again after fixing the cause"
                     % ("the revert" if failed else kind, revert_failed.get("what", ""), revert_failed.get("error", ""),
                        log_tail(revert_failed)))
    elif failed and kind == "apply" and res.get("status") == "reverted":
        parts.append("gpuenv reverted what the apply had done (inverses run: %d; generation %s)"
                     % (len(res.get("reverted") or []), (summary or {}).get("generation")))
    elif failed and kind == "apply":
        parts.append("the operations done before it are left in place (revert is false): "
                     "state=rolled_back undoes generation %s" % (summary or {}).get("generation"))
    if not parts:
        parts.append("%s ended with outcome %r (exit %s)" % (kind, (summary or {}).get("outcome"), (summary or {}).get("exit_code")))
    return "gpuenv " + "; ".join(parts)


def present(module, g):
    p = module.params
    args = ["plan", "--json"]
    plan_file = None
    if not module.check_mode:
        # apply applies exactly this plan, and refuses it if the host
        # changed since: what the task reports is what it did.
        plan_file = os.path.join(module.tmpdir, "gpuenv.plan")
        args += ["--out", plan_file]
    for name in sorted(p["variables"]):
        args += ["--var", "%s=%s" % (name, p["variables"][name])]
    for f in p["var_files"]:
        args += ["--var-file", f]
    for py in p["python"]:
        args += ["--python", py]
    args += ["--", p["spec"]]
    rc, doc, err = g.document(args, "gpuenv plan")
    check_major(doc.get("format_version"), PLAN_FORMAT_MAJOR, "gpuenv plan's document")
    diags = doc.get("diagnostics") or []
    if rc != 0 or doc.get("errored"):
        raise GpuenvError("gpuenv plan failed: " + ("; ".join(errors_of(diags)) or first_line(err)),
                          rc=rc, plan=doc, diagnostics=diags, stderr=err)
    for w in doc.get("warnings") or []:
        module.warn("gpuenv: %s" % w.get("summary", ""))
    steps = doc.get("steps") or []
    result = dict(changed=bool(steps), plan=doc, diagnostics=diags, rc=rc,
                  needs_reboot=bool(doc.get("needs_reboot")))
    if module._diff and steps:
        result["diff"] = [step_diff(s) for s in steps]
    if not steps or module.check_mode:
        return result
    if doc.get("needs_reboot") and not p["allow_reboot"]:
        raise GpuenvError("the plan needs a reboot (%s) and allow_reboot is false: nothing was applied"
                          % ", ".join(s["address"] for s in steps if s.get("flags", {}).get("needs_reboot")),
                          **result)

    args = ["apply", "--json", "--auto-approve"]
    if not p["revert"]:
        args.append("--no-revert")
    rc, events, err = g.stream(args + ["--", plan_file], "gpuenv apply")
    listed, output, run_diags, summary = split_events(events)
    result.update(rc=rc, events=listed, package_manager_output=output, diagnostics=diags + run_diags,
                  summary=summary, generation=(summary or {}).get("generation", 0))
    if summary is None or rc != 0 or summary.get("outcome") != "applied":
        # A failed apply that gpuenv reverted changed nothing for good,
        # but it did run: the host went through a generation.
        result["changed"] = bool(result["generation"])
        raise GpuenvError(run_failure("apply", summary, run_diags), stderr=err, **result)
    result["needs_reboot"] = bool(summary.get("needs_reboot"))
    return result


def rolled_back(module, g):
    p = module.params
    args = ["rollback", "--json"]
    if not module.check_mode:
        args.append("--auto-approve")
    if p["to"] is not None:
        if p["to"] < 0:
            raise GpuenvError("to: %d: generations are numbered from 1, and 0 is before the first" % p["to"])
        args += ["--to", str(p["to"])]
    rc, events, err = g.stream(args, "gpuenv rollback")
    listed, output, diags, summary = split_events(events)
    rollback = None
    for ev in events:
        if ev.get("type") == "rollback_plan":
            rollback = ev.get("rollback")
    result = dict(changed=rollback is not None, rc=rc, events=listed, package_manager_output=output,
                  diagnostics=diags, summary=summary, generation=(summary or {}).get("generation", 0),
                  needs_reboot=bool((summary or {}).get("needs_reboot")))
    if rollback is not None:
        result["rollback"] = rollback
    if module.check_mode and rollback is not None:
        # gpuenv showed what it would undo and, without --auto-approve
        # and without a terminal, declined: nothing ran, and the refusal
        # that follows the rollback_plan event is not the task's.
        shown = [ev for ev in listed if ev.get("type") in ("version", "rollback_plan")]
        result.update(rc=0, events=shown, summary=None, generation=0, diagnostics=[])
        return result
    if summary is None or rc != 0 or summary.get("outcome") != "done":
        raise GpuenvError(run_failure("rollback", summary, diags), stderr=err, **result)
    return result


def doctor(module, g):
    args = ["doctor", "--json"]
    for py in module.params["python"]:
        args += ["--python", py]
    for prog in module.params["programs"]:
        args += ["--program", prog]
    rc, doc, err = g.document(args, "gpuenv doctor")
    # 0 healthy, 2 problems found: both are a report; 1 doctor could not run.
    if rc not in (0, 2):
        raise GpuenvError("gpuenv doctor could not run (exit %d): %s" % (rc, first_line(err)), rc=rc, doctor=doc, stderr=err)
    # rc 2 is left out: Ansible takes any non-zero rc for a failed task.
    return dict(changed=False, doctor=doc, healthy=rc == 0, diagnostics=[])


def observed(module, g):
    args = ["observe", "--json"]
    for py in module.params["python"]:
        args += ["--python", py]
    rc, doc, err = g.document(args, "gpuenv observe")
    if rc != 0:
        raise GpuenvError("gpuenv observe failed (exit %d): %s" % (rc, first_line(err)), rc=rc, stderr=err)
    return dict(changed=False, rc=rc, observation=doc, diagnostics=[])


STATES = {"present": present, "rolled_back": rolled_back, "doctor": doctor, "observed": observed}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", default="present", choices=sorted(STATES)),
            spec=dict(type="path", default="/etc/gpuenv"),
            root=dict(type="path", default="/"),
            state_dir=dict(type="path"),
            variables=dict(type="dict", default={}),
            var_files=dict(type="list", elements="path", default=[]),
            python=dict(type="list", elements="str", default=[]),
            programs=dict(type="list", elements="str", default=[]),
            revert=dict(type="bool", default=True),
            allow_reboot=dict(type="bool", default=True),
            to=dict(type="int"),
            executable=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    if module.params["to"] is not None and module.params["state"] != "rolled_back":
        module.fail_json(msg="to: only state=rolled_back restores a generation; state is %s" % module.params["state"])
    try:
        result = STATES[module.params["state"]](module, Gpuenv(module))
    except GpuenvError as e:
        module.fail_json(msg=e.msg, **e.result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
