defmodule Grove.Load.Cpu do
  @moduledoc """
  What the machine's cores did beside this VM, read from Linux's `/proc`:
  the busy time of every core, less this OS process's own. A bench that
  measures on a shared machine says with it how much of the cores other
  processes took while it ran (a compile, a browser, someone's tests), so
  that a figure bent by them can be told from one bent by the code under
  test. The hogs of `Grove.Load.Hog` are other processes too, and count.

  Where `/proc` cannot be read (not Linux), `sample/0` returns `nil` and
  `others_percent/2` does too.

      before = Grove.Load.Cpu.sample()
      # ... measure ...
      Grove.Load.Cpu.others_percent(before, Grove.Load.Cpu.sample())
      #=> 3.1
  """

  defstruct [:busy, :total, :own]

  @type t :: %__MODULE__{
          busy: non_neg_integer(),
          total: non_neg_integer(),
          own: non_neg_integer()
        }

  @doc "The ticks every core was busy and in all, and this OS process's, now."
  @spec sample() :: t() | nil
  def sample do
    with {:ok, stat} <- File.read("/proc/stat"),
         {:ok, own} <- File.read("/proc/self/stat"),
         {busy, total} <- machine_ticks(stat),
         ticks when is_integer(ticks) <- process_ticks(own) do
      %__MODULE__{busy: busy, total: total, own: ticks}
    else
      _ -> nil
    end
  end

  @doc """
  The share of all the machine's cores (0 to 100) that other processes
  kept busy between two samples, or `nil` without both.
  """
  @spec others_percent(t() | nil, t() | nil) :: float() | nil
  def others_percent(%__MODULE__{} = before, %__MODULE__{} = now) when now.total > before.total do
    others = now.busy - before.busy - (now.own - before.own)
    Float.round(max(others, 0) * 100 / (now.total - before.total), 1)
  end

  def others_percent(_before, _now), do: nil

  # The first line sums every core: user, nice, system, idle, iowait, ...;
  # idle and iowait (the 4th and 5th) are the time nobody ran.
  defp machine_ticks("cpu " <> rest) do
    [line | _] = String.split(rest, "\n", parts: 2)
    ticks = line |> String.split() |> Enum.map(&String.to_integer/1)
    total = Enum.sum(ticks)
    {total - Enum.at(ticks, 3) - Enum.at(ticks, 4, 0), total}
  end

  defp machine_ticks(_stat), do: nil

  # utime and stime, the 12th and 13th fields after the command's name
  # (which may hold spaces, hence the split at its closing parenthesis).
  defp process_ticks(stat) do
    case String.split(stat, ") ", parts: 2) do
      [_, rest] ->
        fields = String.split(rest, " ")
        String.to_integer(Enum.at(fields, 11)) + String.to_integer(Enum.at(fields, 12))

      _ ->
        nil
    end
  end
end
