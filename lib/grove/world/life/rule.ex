defmodule Grove.World.Life.Rule do
  @moduledoc """
  A life-like cellular automaton's rule in the usual "B/S" notation: the
  neighbour counts at which an empty cell is born and at which a live cell
  survives. Conway's Game of Life is `"B3/S23"`; HighLife is `"B36/S23"`.

  Births with no live neighbour (`B0`) are refused: every empty cell of
  the world would come alive at once, outside the world's edge included.

  ## Examples

      iex> {:ok, rule} = Grove.World.Life.Rule.parse("B3/S23")
      iex> {rule.birth, rule.survival}
      {[3], [2, 3]}
      iex> {:ok, rule} = Grove.World.Life.Rule.parse("b36/s23")
      iex> rule.notation
      "B36/S23"
      iex> Grove.World.Life.Rule.parse("B9/S23")
      {:error, "a neighbour count is a digit from 0 to 8, got \\"9\\" in \\"B9/S23\\""}
  """

  @enforce_keys [:notation, :birth, :survival]
  defstruct @enforce_keys

  @type t :: %__MODULE__{
          notation: String.t(),
          birth: [1..8],
          survival: [0..8]
        }

  @doc "Conway's rule, B3/S23."
  @spec conway() :: t()
  def conway, do: %__MODULE__{notation: "B3/S23", birth: [3], survival: [2, 3]}

  @doc "Parses `\"B…/S…\"` (either case, digits 0 to 8 in any order)."
  @spec parse(String.t()) :: {:ok, t()} | {:error, String.t()}
  def parse(notation) when is_binary(notation) do
    case String.split(String.upcase(String.trim(notation)), "/") do
      ["B" <> birth, "S" <> survival] ->
        with {:ok, birth} <- counts(birth, notation),
             {:ok, survival} <- counts(survival, notation) do
          if 0 in birth do
            {:error,
             "#{inspect(notation)} has B0: every empty cell would be born at once; not supported"}
          else
            {:ok,
             %__MODULE__{
               notation: "B#{Enum.join(birth)}/S#{Enum.join(survival)}",
               birth: birth,
               survival: survival
             }}
          end
        end

      _ ->
        {:error,
         "a rule is written \"B<digits>/S<digits>\", like \"B3/S23\"; got #{inspect(notation)}"}
    end
  end

  def parse(other), do: {:error, "a rule is a string like \"B3/S23\", got: #{inspect(other)}"}

  @doc "Like `parse/1`, raising `ArgumentError` on a bad rule."
  @spec parse!(String.t() | t()) :: t()
  def parse!(%__MODULE__{} = rule), do: rule

  def parse!(notation) do
    case parse(notation) do
      {:ok, rule} -> rule
      {:error, why} -> raise ArgumentError, why
    end
  end

  @doc "True when a cell with `neighbours` live neighbours is alive next generation."
  @spec alive_next?(t(), boolean(), 0..8) :: boolean()
  def alive_next?(%__MODULE__{birth: birth}, false, neighbours), do: neighbours in birth
  def alive_next?(%__MODULE__{survival: survival}, true, neighbours), do: neighbours in survival

  defp counts(digits, notation) do
    digits
    |> String.graphemes()
    |> Enum.reduce_while({:ok, []}, fn digit, {:ok, acc} ->
      case Integer.parse(digit) do
        {n, ""} when n in 0..8 ->
          {:cont, {:ok, [n | acc]}}

        _ ->
          {:halt,
           {:error,
            "a neighbour count is a digit from 0 to 8, got #{inspect(digit)} in #{inspect(notation)}"}}
      end
    end)
    |> case do
      {:ok, list} -> {:ok, list |> Enum.uniq() |> Enum.sort()}
      error -> error
    end
  end
end
