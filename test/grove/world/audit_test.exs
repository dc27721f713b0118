defmodule Grove.World.AuditTest do
  use ExUnit.Case, async: true

  alias Grove.World.Audit

  test "a consistent world has no findings" do
    reports = [{[1, 2], []}, {[3], []}]
    assert Audit.findings(reports, [{1, 0}, {2, 0}, {3, 1}], 3) == []
  end

  test "names duplicates, entities missing on either side, miscounts and the zones' own problems" do
    reports = [{[1, 2], ["cell {3, 4} is shared"]}, {[2, 4], []}]
    directory = [{1, 0}, {2, 0}, {5, 1}]

    assert Audit.findings(reports, directory, 2) == [
             "cell {3, 4} is shared",
             "entity 2 is resident in 2 zones",
             "entity 5 is in the directory but in no zone",
             "entity 4 is in a zone but not in the directory",
             "3 entities in the directory, 2 counted"
           ]
  end
end
