defmodule Grove.CountingFormat do
  @moduledoc """
  A view format for tests: each encoding it is asked for is reported to the
  process named in the format (`{Grove.CountingFormat, pid}`), and the
  result is the entries as given, so a test can count how often a zone
  encodes and see what it published.
  """

  @behaviour Grove.World.ViewFormat

  @impl true
  def encode_view(test, what, zone, entries, departed) do
    send(test, {:encoded, what, zone})
    {what, Enum.sort(entries), Enum.sort(departed)}
  end
end
